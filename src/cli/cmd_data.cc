// `shardproof data prepare | verify | encode`: the command-line face of src/data (docs/data.md).
// prepare: sources file → prepared dataset directory (or a content-addressed cache entry);
// verify: re-checks a prepared directory (manifest, tokenizer and every shard's SHA-256);
// encode: a tokenizer file's ids for every line of a text file, one line of ids per line (as
//         `spm_encode --output_format=id` prints them), for checking a tokenizer against its reference.
// Prints a JSON summary on stdout; errors go through report_status (exit 2 usage, 1 otherwise).
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/file_io.h"
#include "data/prepare.h"
#include "data/text_encoder.h"

namespace sp::cli {

namespace {

void register_data_encode(CLI::App* data, CommandResult& result) {
  struct EncodeArgs {
    std::string tokenizer, input;
  };
  auto a = std::make_shared<EncodeArgs>();
  CLI::App* enc = data->add_subcommand("encode", "ids of every line of a text file under a tokenizer file");
  enc->add_option("--tokenizer", a->tokenizer, "SentencePiece tokenizer.model or tokenizer.json")->required();
  enc->add_option("FILE", a->input, "UTF-8 text; each line (without its newline) is encoded alone")->required();
  enc->callback([a, &result] {
    auto tok = data::read_tokenizer_file(a->tokenizer);
    if (!tok.ok()) {
      result.exit_code = report_status(tok.status());
      return;
    }
    auto text = read_file(a->input);
    if (!text.ok()) {
      result.exit_code = report_status(text.status());
      return;
    }
    std::string out;
    std::vector<uint32_t> ids;
    for (size_t at = 0; at < text->size();) {
      size_t end = text->find('\n', at);
      if (end == std::string::npos) end = text->size();
      ids.clear();
      tok->encoder->encode_append(std::string_view(*text).substr(at, end - at), ids);
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
      out += '\n';
      at = end + 1;
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    result.exit_code = 0;
  });
}

}  // namespace

void register_data(CLI::App& app, CommandResult& result) {
  CLI::App* data = app.add_subcommand("data", "prepare and verify training data with lineage");
  data->require_subcommand(1);

  struct PrepareArgs {
    data::PrepareOptions opt;
    std::string out, cache_root;
  };
  auto args = std::make_shared<PrepareArgs>();
  CLI::App* prep = data->add_subcommand(
      "prepare",
      "filter, scrub, deduplicate, split and decontaminate a corpus; train the BPE tokenizer; write "
      "token shards, manifest and lineage");
  prep->add_option("--sources", args->opt.sources_file, "sources file (e.g. data/sources.json)")->required();
  auto* out = prep->add_option("--out", args->out, "output directory (must not exist or be empty)");
  auto* cache = prep->add_option("--cache-root", args->cache_root,
                                 "prepare into CACHE_ROOT/<content hash> instead, reusing a verified earlier result");
  out->excludes(cache);
  prep->add_option("--tokenizer", args->opt.tokenizer_file,
                   "a user's tokenizer instead of training one: SentencePiece tokenizer.model or tokenizer.json");
  prep->add_option("--vocab-size", args->opt.vocab_size, "BPE vocabulary size (≥ 257; a --tokenizer's own size)")
      ->capture_default_str();
  prep->add_option("--eval-fraction", args->opt.eval_fraction, "share of documents in the eval split")
      ->capture_default_str();
  prep->add_option("--seed", args->opt.seed, "seed of the split hash")->capture_default_str();
  prep->add_option("--min-units", args->opt.filter.min_units, "too_short below this many words/Han characters")
      ->capture_default_str();
  prep->add_option("--jaccard", args->opt.minhash.threshold, "near-duplicate Jaccard threshold")->capture_default_str();
  prep->add_option("--ngram", args->opt.contamination_ngram, "contamination n-gram length in units")
      ->capture_default_str();
  prep->add_option("--shard-tokens", args->opt.shard_tokens, "tokens per shard file")->capture_default_str();
  prep->callback([args, &result] {
    if (args->out.empty() == args->cache_root.empty()) {
      result.exit_code = report_status(invalid_argument("data prepare needs exactly one of --out or --cache-root"));
      return;
    }
    auto r =
        args->out.empty() ? data::prepare_cached(args->opt, args->cache_root) : data::prepare(args->opt, args->out);
    if (!r.ok()) {
      result.exit_code = report_status(r.status());
      return;
    }
    std::printf("%s\n", data::summary_to_json(*r).dump(2).c_str());
    result.exit_code = 0;
  });

  register_data_encode(data, result);

  auto dir = std::make_shared<std::string>();
  CLI::App* verify = data->add_subcommand("verify", "verify a prepared dataset directory");
  verify->add_option("DIR", *dir, "prepared dataset directory")->required();
  verify->callback([dir, &result] {
    auto r = data::read_prepared_summary(*dir);
    if (!r.ok()) {
      result.exit_code = report_status(r.status());
      return;
    }
    std::printf("%s\n", data::summary_to_json(*r).dump(2).c_str());
    result.exit_code = 0;
  });
}

}  // namespace sp::cli

// `shardproof data prepare | verify`: the command-line face of src/data (docs/data.md).
// prepare: sources file → prepared dataset directory (or a content-addressed cache entry);
// verify: re-checks a prepared directory (manifest, tokenizer and every shard's SHA-256).
// Prints a JSON summary on stdout; errors go through report_status (exit 2 usage, 1 otherwise).
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "data/prepare.h"

namespace sp::cli {

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
  prep->add_option("--vocab-size", args->opt.vocab_size, "BPE vocabulary size (≥ 257)")->capture_default_str();
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

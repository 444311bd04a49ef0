// `shardproof ckpt verify | inspect | export | import`: recovery checkpoints from the files alone
// (docs/checkpoints.md). Single-process; nothing here runs MPI. Exit 0 success, 1 damaged or failed,
// 2 usage error.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "ckpt/consolidated.h"
#include "ckpt/hf_layout.h"
#include "ckpt/hf_weights.h"
#include "ckpt/load.h"
#include "ckpt/names.h"
#include "ckpt/reshard.h"
#include "cli/command.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "core/log.h"
#include "evidence/run_dir.h"

namespace sp::cli {
namespace {

struct Selected {
  ckpt::CheckpointPaths paths{"."};
  ckpt::CheckpointListing listing;
  std::optional<int64_t> step;  // a step directory was named, or --step
};

Result<Selected> select(const std::string& dir, int64_t step_option) {
  SP_ASSIGN_OR_RETURN(const ckpt::CheckpointTarget target, ckpt::resolve_checkpoint_target(dir));
  Selected s{ckpt::CheckpointPaths(target.run_dir), {}, target.step};
  if (step_option >= 0) s.step = step_option;
  SP_ASSIGN_OR_RETURN(s.listing, ckpt::list_checkpoints(s.paths));
  return s;
}

// The step to use when none was named: LATEST's (refusing a damaged LATEST, which is what a resume does).
Result<int64_t> default_step(const Selected& s) {
  const auto& saved = s.listing.steps;
  if (s.step && std::find(saved.begin(), saved.end(), *s.step) == saved.end()) {
    // A step this run never saved (not one whose directory LATEST names and someone removed).
    auto latest = ckpt::read_latest(s.paths);
    if (!latest.ok() || latest->step != *s.step)
      return not_found("'{}' holds no checkpoint of step {}: the run saved {}", s.paths.root(), *s.step,
                       saved.empty() ? std::string("none") : fmt::format("step(s) {}", fmt::join(saved, ", ")))
          .with_hint(saved.empty() ? "train with evidence.checkpoint_every or --checkpoint-at to save one"
                                   : "--step N with one of them (`shardproof ckpt inspect DIR` lists them)");
  }
  if (s.step) return *s.step;
  auto latest = ckpt::read_latest(s.paths);
  if (!latest.ok()) return latest.status().with_hint("name a checkpoint with --step N (see `shardproof ckpt inspect`)");
  return latest->step;
}

// Sizes in MiB, the unit of every other figure (ledger, report, plan).
std::string megabytes(uint64_t bytes) { return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0); }

Status run_verify(const std::string& dir, int64_t step_option, int& rc) {
  SP_ASSIGN_OR_RETURN(const Selected s, select(dir, step_option));
  std::vector<int64_t> steps;
  bool bad = false;
  if (s.step) {
    steps.push_back(*s.step);
  } else {
    auto latest = ckpt::read_latest(s.paths);
    if (!latest.ok()) {
      std::printf("LATEST: DAMAGED: %s\n", latest.status().message().c_str());
      bad = true;
    } else {
      std::printf("LATEST: step %lld (manifest %s)\n", static_cast<long long>(latest->step),
                  latest->manifest_digest.substr(0, 16).c_str());
      if (std::find(s.listing.steps.begin(), s.listing.steps.end(), latest->step) == s.listing.steps.end()) {
        std::printf("LATEST: DAMAGED: it names step %lld, which has no directory\n",
                    static_cast<long long>(latest->step));
        bad = true;
      }
    }
    for (int64_t st : s.listing.steps)
      if (!latest.ok() || st <= latest->step)
        steps.push_back(st);
      else
        std::printf("%s: not committed (newer than LATEST): ignored by resume\n", ckpt::step_dir_name(st).c_str());
  }
  if (steps.empty() && !bad) return not_found("'{}' holds no checkpoint", s.paths.root());
  for (int64_t st : steps) {
    const Status v = ckpt::verify_checkpoint(s.paths, st);
    if (v.ok()) {
      auto m = ckpt::read_manifest(s.paths, st);
      std::printf("%s: OK (%zu shards, %s, %s)\n", ckpt::step_dir_name(st).c_str(), m->shards.size(),
                  megabytes(m->total_bytes()).c_str(), m->topology.describe().c_str());
    } else {
      std::printf("%s: DAMAGED: %s\n", ckpt::step_dir_name(st).c_str(), v.message().c_str());
      bad = true;
    }
  }
  for (const std::string& name : s.listing.leftovers)
    std::printf("%s: leftover of an interrupted save: ignored by resume, removed by the next save\n", name.c_str());
  for (const std::string& name : s.listing.refused) std::printf("%s: set aside by --fallback-previous\n", name.c_str());
  for (const std::string& name : s.listing.unknown) std::printf("%s: unknown entry (not a checkpoint)\n", name.c_str());
  std::printf("%s\n", bad ? "FAIL" : "PASS");
  rc = bad ? 1 : 0;
  return Status();
}

Status run_inspect(const std::string& dir, int64_t step_option, bool tensors) {
  SP_ASSIGN_OR_RETURN(const Selected s, select(dir, step_option));
  std::printf("checkpoints in %s\n", s.paths.root().c_str());
  auto latest = ckpt::read_latest(s.paths);
  if (latest.ok())
    std::printf("  LATEST -> step %lld\n", static_cast<long long>(latest->step));
  else
    std::printf("  LATEST unusable: %s\n", latest.status().message().c_str());
  for (int64_t st : s.listing.steps) {
    auto m = ckpt::read_manifest(s.paths, st);
    if (!m.ok()) {
      std::printf("  %s  unreadable: %s\n", ckpt::step_dir_name(st).c_str(), m.status().message().c_str());
      continue;
    }
    std::printf("  %s  %s  %zu shards  %s  optimizer step %lld  contract %s\n", ckpt::step_dir_name(st).c_str(),
                megabytes(m->total_bytes()).c_str(), m->shards.size(), m->topology.describe().c_str(),
                static_cast<long long>(m->optimizer_steps), m->contract_hash.substr(0, 12).c_str());
  }
  for (const auto* list : {&s.listing.leftovers, &s.listing.refused, &s.listing.unknown})
    for (const std::string& name : *list) std::printf("  %s  (not a committed checkpoint)\n", name.c_str());
  if (s.listing.steps.empty()) return Status();
  auto chosen = default_step(s);
  if (!chosen.ok()) return Status();
  SP_ASSIGN_OR_RETURN(const ckpt::Manifest m, ckpt::read_manifest(s.paths, *chosen));
  SP_ASSIGN_OR_RETURN(const model::LlamaConfig mc, m.model_config());
  std::printf("\nstep %lld  (manifest digest %s)\n", static_cast<long long>(m.step), m.digest.c_str());
  std::printf("  model: V %lld, C %lld, L %lld, H %lld, KV %lld, F %lld, tied embeddings %s, %lld parameters\n",
              static_cast<long long>(mc.vocab_size), static_cast<long long>(mc.dim),
              static_cast<long long>(mc.n_layers), static_cast<long long>(mc.n_heads),
              static_cast<long long>(mc.n_kv_heads), static_cast<long long>(mc.ffn_dim),
              mc.tie_embeddings ? "yes" : "no", static_cast<long long>(mc.param_count()));
  std::printf("  data cursor: next step %s\n", m.loader_cursor.value("next_step", nlohmann::json()).dump().c_str());
  for (const auto& [name, p] : m.evidence)
    std::printf("  evidence: %s first %llu bytes\n", name.c_str(), static_cast<unsigned long long>(p.bytes));
  const std::string step_dir = s.paths.step_dir(m.step);
  auto source = ckpt::CheckpointSource::open(step_dir, m, mc);
  for (const ckpt::ShardRecord& r : m.shards)
    std::printf("  %s  %-14s %12llu bytes  sha256 %s\n", r.file.c_str(), r.coords.c_str(),
                static_cast<unsigned long long>(r.bytes), r.sha256.substr(0, 16).c_str());
  if (!source.ok()) {
    std::printf("  shards unreadable: %s\n", source.status().message().c_str());
    return Status();
  }
  std::printf("  %zu stored fragments\n", source->fragment_count());
  if (tensors)
    for (const model::WeightSpec& w : model::weight_table(mc))
      std::printf("    %-48s %-14s %s\n", w.name.c_str(), shape_string(w.shape).c_str(),
                  w.tp_dim < 0 ? "replicated under TP" : fmt::format("TP split on dim {}", w.tp_dim).c_str());
  return Status();
}

// A damaged or missing checkpoint: this command's remedy is another step.
Status with_step_remedy(const Status& st) {
  if (st.code() != StatusCode::kCorrupt && st.code() != StatusCode::kNotFound) return st;
  return st.with_hint((st.hint().empty() ? "" : st.hint() + "; ") +
                      "--step N uses another checkpoint (`shardproof ckpt inspect DIR` lists them)");
}

// --hf OUTDIR: the Hugging Face layout (config.json, model.safetensors or shards + index).
Status run_export_hf(const std::string& dir, int64_t step_option, const std::string& out, const std::string& max_shard,
                     const std::string& dtype, bool overwrite) {
  ckpt::HfExportOptions options;
  SP_ASSIGN_OR_RETURN(options.max_shard_bytes, ckpt::parse_shard_size(max_shard));
  if (dtype != "fp32" && dtype != "bf16")
    return invalid_argument("--dtype '{}' is not an export dtype", dtype).with_hint("fp32 or bf16");
  options.dtype = dtype == "bf16" ? DType::kBF16 : DType::kF32;
  options.overwrite = overwrite;
  SP_RETURN_IF_ERROR(evidence::refuse_evidence_target(out, "--hf"));  // never into a run or a sealed bundle
  SP_ASSIGN_OR_RETURN(const Selected s, select(dir, step_option));
  SP_ASSIGN_OR_RETURN(const int64_t step, default_step(s));
  auto exported = ckpt::export_hf(s.paths, step, out, options);
  if (!exported.ok()) return with_step_remedy(exported.status());
  const ckpt::HfExportSummary& e = *exported;
  log_info("exported step {}: {} tensors, {} of {} in {}: {}", e.step, e.tensors, megabytes(e.tensor_bytes),
           dtype == "bf16" ? "BF16" : "F32", e.out_dir, fmt::join(e.files, ", "));
  return Status();
}

Status run_export(const std::string& dir, int64_t step_option, const std::string& out) {
  SP_RETURN_IF_ERROR(evidence::refuse_evidence_target(out, "--out"));  // never into a run or a sealed bundle
  SP_ASSIGN_OR_RETURN(const Selected s, select(dir, step_option));
  SP_ASSIGN_OR_RETURN(const int64_t step, default_step(s));
  auto exported = ckpt::export_consolidated(s.paths, step, out);
  if (!exported.ok()) return with_step_remedy(exported.status());
  const ckpt::ExportSummary& e = *exported;
  log_info("exported step {}: {} tensors, {} -> {} (+ {})", e.step, e.tensors, megabytes(e.bytes), e.weights_path,
           e.config_path);
  return Status();
}

Status run_import(const std::string& file, const RunSource& source) {
  SP_ASSIGN_OR_RETURN(const config::RunConfig rc, source.load(config::DeepSpeedInput{}));
  SP_ASSIGN_OR_RETURN(const ckpt::NamedTensors w, ckpt::read_hf_weights(file, rc.model));
  int64_t n = 0;
  for (const auto& [name, v] : w) n += static_cast<int64_t>(v.size());
  std::printf("%s: %zu tensors, %lld parameters, every name, shape and value valid for this model\n", file.c_str(),
              w.size(), static_cast<long long>(n));
  std::printf(
      "start a run from them with:  shardproof train --init-from %s [--preset/--config/--model-config/--set as "
      "here] --out DIR\n",
      file.c_str());
  return Status();
}

}  // namespace

void register_ckpt(CLI::App& app, CommandResult& result) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "Recovery checkpoints: verify, inspect, export, import");
  ckpt->require_subcommand(1);
  struct Opts {
    std::string dir, out, hf, file, max_shard = "5GB", dtype = "fp32";
    RunSource source;  // import: the run configuration the weights must fit
    int64_t step = -1;
    bool tensors = false, overwrite = false;
  };
  auto o = std::make_shared<Opts>();

  CLI::App* verify = ckpt->add_subcommand("verify", "Full integrity check of every committed checkpoint (exit 0/1)");
  verify->add_option("DIR", o->dir, "Run directory, its checkpoints/ directory, or one step directory")->required();
  verify->add_option("--step", o->step, "Only this step");
  verify->callback([o, &result] {
    int rc = 0;
    const Status st = run_verify(o->dir, o->step, rc);
    result.exit_code = st.ok() ? rc : report_status(st);
  });

  CLI::App* inspect = ckpt->add_subcommand("inspect", "Summary: steps, topology, sizes, shards, tensors");
  inspect->add_option("DIR", o->dir, "Run directory, its checkpoints/ directory, or one step directory")->required();
  inspect->add_option("--step", o->step, "Describe this step (default: LATEST)");
  inspect->add_flag("--tensors", o->tensors, "List every logical tensor");
  inspect->callback([o, &result] { result.exit_code = report_status(run_inspect(o->dir, o->step, o->tensors)); });

  CLI::App* exp = ckpt->add_subcommand(
      "export", "Weights with HF names: one F32 file (--out) or a Hugging Face model directory (--hf)");
  exp->add_option("DIR", o->dir, "Run directory, its checkpoints/ directory, or one step directory")->required();
  auto* out = exp->add_option("--out", o->out, "Output safetensors file (config.json is written beside it)");
  auto* hf = exp->add_option("--hf", o->hf,
                             "Output directory in the Hugging Face layout: config.json and model.safetensors, or "
                             "model-0000i-of-0000N.safetensors + model.safetensors.index.json (docs/huggingface.md)");
  out->excludes(hf);
  hf->excludes(out);
  exp->add_option("--max-shard-size", o->max_shard, "With --hf: largest shard, e.g. 5GB (default), 500MB, 2GiB");
  exp->add_option("--dtype", o->dtype, "With --hf: fp32 (default) or bf16 (rounded to nearest even)");
  exp->add_flag("--overwrite", o->overwrite, "With --hf: replace a non-empty output directory");
  exp->add_option("--step", o->step, "Export this step (default: LATEST)");
  exp->callback([o, &result, exp] {
    if (o->hf.empty() == o->out.empty()) {
      result.exit_code = report_status(
          invalid_argument("ckpt export needs one of --out FILE or --hf DIR").with_hint("--hf DIR for transformers"));
      return;
    }
    if (o->hf.empty() && (exp->count("--max-shard-size") || exp->count("--dtype") || o->overwrite)) {
      result.exit_code = report_status(invalid_argument("--max-shard-size, --dtype and --overwrite go with --hf"));
      return;
    }
    result.exit_code =
        report_status(o->hf.empty() ? run_export(o->dir, o->step, o->out)
                                    : run_export_hf(o->dir, o->step, o->hf, o->max_shard, o->dtype, o->overwrite));
  });

  CLI::App* imp = ckpt->add_subcommand(
      "import", "Check consolidated weights against a run configuration; train --init-from FILE starts from them");
  imp->add_option("FILE", o->file, "Weights: a safetensors file, an index, or a Hugging Face model directory")
      ->required();
  add_run_source_options(imp, o->source,
                         {.deepspeed = false,
                          .root = false,
                          .model_config_help = "The [model] from a Hugging Face config.json",
                          .set_help = "Override a key (repeatable)"});
  imp->callback([o, &result] { result.exit_code = report_status(run_import(o->file, o->source)); });
}

}  // namespace sp::cli

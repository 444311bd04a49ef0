#include "config/ds_config.h"

#include <fmt/format.h>

#include <filesystem>

#include "config/ds_mapper.h"
#include "core/file_io.h"
#include "core/json_io.h"

namespace sp::config {
using namespace ds_detail;  // NOLINT: the mapper's helpers, internal to config/ds_config.cc, ds_sections.cc
namespace {

// (DeepSpeedConfig._set_batch_related_parameters, then _batch_assertion): floor divisions, then the check.
void map_batch(Mapper& m, const json& ds, int dp, DsMapping& out) {
  constexpr int64_t kBig = int64_t{1} << 40;  // products of three stay far inside int64
  // A given batch key is a positive count (DeepSpeed: "... has to be greater than 0"), refused as it is
  // written, before anything is inferred from it.
  bool bad = false;
  for (const char* key : {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"})
    if (ds.contains(key) && ds.at(key).is_number() && !(ds.at(key).get<double>() >= 1)) {
      m.errors.push_back(
          fmt::format("{} = {}: a batch size is a positive integer (DeepSpeed: \"{} has to be greater "
                      "than 0\"); hint: give a count of sequences, 1 or more",
                      key, ds.at(key).dump(), key));
      bad = true;
    }
  if (bad) return;
  auto tb = m.integer(ds, "", "train_batch_size", 1, kBig);
  auto mb = m.integer(ds, "", "train_micro_batch_size_per_gpu", 1, kBig);
  auto ga = m.integer(ds, "", "gradient_accumulation_steps", 1, kBig);
  if ((ds.contains("train_batch_size") && !tb) || (ds.contains("train_micro_batch_size_per_gpu") && !mb) ||
      (ds.contains("gradient_accumulation_steps") && !ga))
    return;  // its type or range error is recorded
  std::string inferred;
  if (tb && mb && ga) {
  } else if (tb && mb) {
    ga = *mb > 0 && dp > 0 ? *tb / *mb / dp : 0;
    inferred = fmt::format("gradient_accumulation_steps inferred as {} // {} // {} = {}", *tb, *mb, dp, *ga);
  } else if (tb && ga) {
    mb = *ga > 0 ? *tb / dp / *ga : 0;
    inferred = fmt::format("train_micro_batch_size_per_gpu inferred as {} // {} // {} = {}", *tb, dp, *ga, *mb);
  } else if (mb && ga) {
    if (static_cast<__int128>(*mb) * *ga * dp > kBig) {
      m.errors.push_back(fmt::format("train_batch_size inferred as {} × {} × {} exceeds 2^40", *mb, *ga, dp));
      return;
    }
    tb = *mb * *ga * dp;
    inferred = fmt::format("train_batch_size inferred as {} × {} × {} = {}", *mb, *ga, dp, *tb);
  } else if (tb) {
    ga = 1;
    mb = *tb / dp;
    inferred = fmt::format(
        "gradient_accumulation_steps = 1 and train_micro_batch_size_per_gpu inferred as {} // {} = {}", *tb, dp, *mb);
  } else if (mb) {
    ga = 1;
    tb = *mb * dp;
    inferred =
        fmt::format("gradient_accumulation_steps = 1 and train_batch_size inferred as {} × {} = {}", *mb, dp, *tb);
  } else {
    m.errors.push_back(
        "train_batch_size / train_micro_batch_size_per_gpu: neither is given; DeepSpeed requires at least one "
        "(\"Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided\")");
    return;
  }
  const std::string why = inferred.empty() ? "" : " (" + inferred + ")";
  if (*tb <= 0 || *mb <= 0 || *ga <= 0) {
    if (*tb <= 0) m.errors.push_back(fmt::format("train_batch_size = {} has to be greater than 0{}", *tb, why));
    if (*mb <= 0)
      m.errors.push_back(fmt::format("train_micro_batch_size_per_gpu = {} has to be greater than 0{}", *mb, why));
    if (*ga <= 0)
      m.errors.push_back(fmt::format("gradient_accumulation_steps = {} has to be greater than 0{}", *ga, why));
    return;
  }
  const __int128 product = static_cast<__int128>(*mb) * *ga * dp;
  if (static_cast<__int128>(*tb) != product) {
    const std::string product_text =
        product > INT64_MAX ? std::string("more than 2^63") : std::to_string(static_cast<int64_t>(product));
    m.errors.push_back(fmt::format(
        "batch sizes disagree: train_batch_size = {} but train_micro_batch_size_per_gpu × gradient_accumulation_steps "
        "× dp = {} × {} × {} = {}{} (DeepSpeed: \"Check batch related parameters. train_batch_size is not equal to "
        "micro_batch_per_gpu * gradient_acc_step * world_size {} != {} * {} * {}\"); give two of the three for dp = {}",
        *tb, *mb, *ga, dp, product_text, why, *tb, *mb, *ga, dp, dp));
    return;
  }
  out.train_batch_size = *tb;
  out.micro_batch = *mb;
  out.gradient_accumulation_steps = *ga;
  out.dp = dp;
  const std::string ga_text = fmt::format(
      "{} micro-batches per dp rank per step = train.global_batch / (train.micro_batch_size × dp {}) "
      "(derived, not a key)",
      *ga, dp);
  if (ds.contains("train_batch_size"))
    m.mapped("train_batch_size", m.set("train", "global_batch", *tb));
  else
    m.mapped("train_batch_size", "(absent) " + m.set("train", "global_batch", *tb) + why);
  if (ds.contains("train_micro_batch_size_per_gpu"))
    m.mapped("train_micro_batch_size_per_gpu", m.set("train", "micro_batch_size", *mb));
  else
    m.mapped("train_micro_batch_size_per_gpu", "(absent) " + m.set("train", "micro_batch_size", *mb) + why);
  m.mapped("gradient_accumulation_steps", (ds.contains("gradient_accumulation_steps") ? "" : "(absent) ") + ga_text +
                                              (ds.contains("gradient_accumulation_steps") ? "" : why));
}
}  // namespace

std::string DsKeyOutcome::line() const {
  return kind == Kind::kMapped ? fmt::format("{} → {}", key, outcome)
                               : fmt::format("{}: accepted, no effect: {}", key, outcome);
}

json DsKeyOutcome::to_json() const {
  return {{"key", key}, {"kind", kind == Kind::kMapped ? "mapped" : "no_effect"}, {"outcome", outcome}};
}

json DsMapping::to_json() const {
  json k = json::array();
  for (const auto& o : keys) k.push_back(o.to_json());
  return {{"dp", dp},
          {"train_batch_size", train_batch_size},
          {"micro_batch", micro_batch},
          {"gradient_accumulation_steps", gradient_accumulation_steps},
          {"keys", k}};
}

Result<json> read_ds_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return invalid_argument("--deepspeed '{}': no such file", path).with_hint("check the path");
  auto text = read_file(path, uint64_t{1} << 24);
  if (!text.ok()) return invalid_argument("--deepspeed '{}': {}", path, text.status().message());
  auto j = parse_json_strict(*text, "--deepspeed '" + path + "'");
  if (!j.ok())
    return invalid_argument("{}", j.status().message())
        .with_hint("a ds_config.json is one JSON object (docs/deepspeed.md)");
  if (!j->is_object())
    return invalid_argument("--deepspeed '{}': the top level must be a JSON object {{...}}, got {}", path,
                            j->type_name());
  return j;
}

Result<DsMapping> apply_ds_config(const json& ds, int dp, json& config) {
  if (!ds.is_object()) return invalid_argument("ds_config: the top level must be a JSON object");
  if (dp < 1) return invalid_argument("ds_config: data-parallel size {} must be ≥ 1", dp);
  json work = config;
  Mapper m(work);
  DsMapping out;
  m.unknown_keys(
      ds, "",
      {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization", "bf16",
       "bfloat16", "fp16", "gradient_clipping", "optimizer", "scheduler", "activation_checkpointing", "steps_per_print",
       "wall_clock_breakdown", "zero_allow_untested_optimizer", "moe", "compression_training", "aio"});
  // Refused by name, with the reason.
  if (ds.contains("moe"))
    m.refuse("moe", "Mixture-of-Experts layers are not built: shardproof trains dense LLaMA models");
  if (ds.contains("compression_training"))
    m.refuse("compression_training",
             "compression (quantization-aware training, pruning, layer reduction) changes the "
             "model's math; not built");
  if (ds.contains("aio")) m.refuse("aio", std::string("the async I/O of NVMe offload: ") + kOffload);
  map_batch(m, ds, dp, out);
  if (const json* z = m.object(ds, "", "zero_optimization")) map_zero(m, *z);
  map_precision(m, ds);
  if (auto c = m.number(ds, "", "gradient_clipping", 0.0, 1e30))
    m.mapped("gradient_clipping", m.set("train", "grad_clip", *c) + (*c == 0 ? " (off, as DeepSpeed's 0.0)" : ""));
  const std::string sched = scheduler_type(ds);
  if (const json* o = m.object(ds, "", "optimizer")) map_optimizer(m, *o, sched);
  if (const json* s = m.object(ds, "", "scheduler")) map_scheduler(m, *s);
  if (const json* a = m.object(ds, "", "activation_checkpointing")) map_activation_checkpointing(m, *a);
  if (m.integer(ds, "", "steps_per_print", 1, INT64_MAX))
    m.no_effect("steps_per_print",
                "shardproof prints a progress line per step and writes every step's loss and lr to "
                "metrics.jsonl");
  if (m.boolean(ds, "", "wall_clock_breakdown"))
    m.no_effect("wall_clock_breakdown",
                "the step's compute / communication / idle split is always recorded (metrics.jsonl, timeline/)");
  if (m.boolean(ds, "", "zero_allow_untested_optimizer"))
    m.no_effect("zero_allow_untested_optimizer",
                "the optimizer is shardproof's own AdamW, tested with every ZeRO stage");
  if (!m.errors.empty()) {
    std::string msg = fmt::format("ds_config: {} problem{}", m.errors.size(), m.errors.size() == 1 ? "" : "s");
    for (const auto& e : m.errors) msg += "\n  - " + e;
    return Status(StatusCode::kInvalidArgument, msg,
                  "docs/deepspeed.md lists every key, what it becomes, and why some are refused");
  }
  out.keys = std::move(m.keys);
  config = std::move(work);
  return out;
}

}  // namespace sp::config
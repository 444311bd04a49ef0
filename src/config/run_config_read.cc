// Reading a RunConfig from its JSON form (a TOML file with --set applied, or a contract's "config"), one
// section at a time through core/json_io's JsonFields: every key optional (its default stands), every value
// checked for type and range, the first problem returned naming section.key, its value and the rule, and a
// key nobody reads refused with the section's keys as the fix. Schema and defaults: docs/config.md.
#include <fmt/format.h>

#include <set>
#include <type_traits>

#include "config/run_config.h"
#include "core/json_io.h"

namespace sp::config {
namespace {

using nlohmann::json;
constexpr int64_t kBig = int64_t{1} << 40;

// The reader of section `name` (an empty one when absent), or "[name] must be a table".
Result<JsonFields> section(const json& root, const char* name) {
  static const json kEmpty = json::object();
  const auto it = root.find(name);
  if (it == root.end()) return JsonFields::input(kEmpty, name);
  if (!it->is_object()) return invalid_argument("[{}] must be a table", name);
  return JsonFields::input(*it, name);
}

template <typename T>
requires std::is_integral_v<T>
void set(const std::optional<int64_t>& v, T& out) {
  if (v) out = static_cast<T>(*v);
}
template <typename T>
requires(!std::is_integral_v<T>) void set(const std::optional<T>& v, T& out) {
  if (v) out = *v;
}
// A choice among names, as its enum value.
template <typename E>
void choose(JsonFields& f, const char* key, const std::vector<std::pair<std::string, E>>& options, E& out) {
  std::vector<std::string> names;
  for (const auto& [n, e] : options) names.push_back(n);
  if (const auto s = f.read_choice(key, names))
    for (const auto& [n, e] : options)
      if (n == *s) out = e;
}
// Every key read: the first problem, or a key nobody asked for.
Status finish(JsonFields& f) {
  f.refuse_unread();
  return f.first_problem();
}

Status read_train(const json& root, TrainConfig& t) {
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "train"));
  set(f.read_integer("seed", 0, INT64_MAX), t.seed);
  set(f.read_integer("steps", 1, kBig), t.steps);
  set(f.read_integer("global_batch", 1, kBig), t.global_batch);
  set(f.read_integer("micro_batch_size", 1, kBig), t.micro_batch_size);
  set(f.read_integer("seq_len", 1, kBig), t.seq_len);
  set(f.read_number("lr", 0.0, 10.0), t.lr);
  set(f.read_number("min_lr", 0.0, 10.0), t.min_lr);
  set(f.read_integer("warmup_steps", 0, kBig), t.warmup_steps);
  set(f.read_number("weight_decay", 0.0, 10.0), t.weight_decay);
  set(f.read_number("beta1", 0.0, 0.999999), t.beta1);
  set(f.read_number("beta2", 0.0, 0.999999999), t.beta2);
  set(f.read_number("eps", 1e-30, 1.0), t.eps);
  set(f.read_number("grad_clip", 0.0, 1e30), t.grad_clip);
  set(f.read_integer("eval_every", 0, kBig), t.eval_every);
  set(f.read_integer("eval_batches", 0, kBig), t.eval_batches);
  choose(f, "recompute",
         {{"full", model::Recompute::kFull},
          {"selective", model::Recompute::kSelective},
          {"none", model::Recompute::kNone}},
         t.recompute);
  const std::string precision = f.read_string("precision").value_or("fp32");
  const std::string grad_dtype = f.read_string("grad_dtype").value_or("fp32");
  const std::string gemm16 = f.read_string("gemm16").value_or("auto");
  const std::string gemm32 = f.read_string("gemm32").value_or("auto");
  const std::string lr_schedule = f.read_string("lr_schedule").value_or("cosine");
  choose(f, "warmup_type", {{"linear", optim::WarmupType::kLinear}, {"log", optim::WarmupType::kLog}}, t.warmup_type);
  set(f.read_number("warmup_min_lr", 0.0, 10.0), t.warmup_min_lr);
  set(f.read_number("warmup_min_ratio", 0.0, 1.0), t.warmup_min_ratio);
  set(f.read_number("cos_min_ratio", 0.0, 1.0), t.cos_min_ratio);
  set(f.read_integer("schedule_steps", 0, kBig), t.schedule_steps);
  SP_RETURN_IF_ERROR(finish(f));
  SP_ASSIGN_OR_RETURN(t.lr_schedule, optim::lr_schedule_from_name(lr_schedule));
  if (t.lr_schedule == optim::LrScheduleKind::kCosine)
    for (const char* k : {"warmup_type", "warmup_min_lr", "warmup_min_ratio", "cos_min_ratio", "schedule_steps"})
      if (root.contains("train") && root.at("train").contains(k))
        return invalid_argument(
                   "train.{} is a parameter of DeepSpeed's schedules, not of train.lr_schedule = \"cosine\"", k)
            .with_hint(
                "set train.lr_schedule = \"warmup_lr\", \"warmup_decay_lr\" or \"warmup_cosine_lr\", or drop it");
  SP_ASSIGN_OR_RETURN(t.precision, model::precision_from_names(precision, grad_dtype));
  auto gemm16_kind = kernels::gemm16_kind_from_name(gemm16);
  if (!gemm16_kind.ok())
    return invalid_argument("train.gemm16 = \"{}\" is not a 16-bit GEMM backend", gemm16)
        .with_hint("use \"auto\", \"onednn\" or \"fallback\" (docs/kernels.md §\"The 16-bit GEMM\")");
  t.gemm16 = *gemm16_kind;
  auto gemm32_kind = kernels::gemm32_kind_from_name(gemm32);
  if (!gemm32_kind.ok())
    return invalid_argument("train.gemm32 = \"{}\" is not an fp32 GEMM backend", gemm32)
        .with_hint(gemm32_kind.status().hint());
  t.gemm32 = *gemm32_kind;
  return Status();
}

Status read_parallel(const json& root, ParallelConfig& p) {
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "parallel"));
  set(f.read_integer("dp", 1, 1 << 20), p.dp);
  set(f.read_integer("tp", 1, 1 << 20), p.tp);
  set(f.read_integer("pp", 1, 1 << 20), p.pp);
  set(f.read_integer("zero", 0, 3), p.zero);
  choose(f, "schedule",
         {{"1f1b", Schedule::k1F1B},
          {"gpipe", Schedule::kGpipe},
          {"interleaved", Schedule::kInterleaved},
          {"zb-h1", Schedule::kZbH1}},
         p.schedule);
  set(f.read_integer("virtual_stages", 1, 1 << 10), p.virtual_stages);
  set(f.read_boolean("sequence_parallel"), p.sequence_parallel);
  choose(f, "reduction", {{"deterministic", Reduction::kDeterministic}, {"fast", Reduction::kFast}}, p.reduction);
  set(f.read_integer("overlap_buckets", 0, 1 << 10), p.overlap_buckets);
  set(f.read_string("axis_order"), p.axis_order);
  set(f.read_integer("blas_threads", 1, 1024), p.blas_threads);
  choose(f, "architecture", {{"allreduce", Architecture::kAllReduce}, {"ps", Architecture::kParameterServer}},
         p.architecture);
  set(f.read_integer("servers", 0, 1 << 20), p.servers);
  set(f.read_integer("staleness", 0, 1 << 20), p.staleness);
  choose(f, "staleness_schedule", {{"fixed", StalenessSchedule::kFixed}, {"free", StalenessSchedule::kFree}},
         p.staleness_schedule);
  set(f.read_integer("replay_workers", 0, 1 << 20), p.replay_workers);
  return finish(f);
}

Status read_data(const json& root, DataConfig& d) {
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "data"));
  set(f.read_string("sources"), d.sources);
  set(f.read_string("tokenizer"), d.tokenizer);
  set(f.read_integer("vocab_size", 1, int64_t{1} << 31), d.vocab_size);
  set(f.read_number("eval_fraction", 0.0, 0.5), d.eval_fraction);
  set(f.read_integer("seed", 0, INT64_MAX), d.seed);
  return finish(f);
}

Status read_evidence(const json& root, EvidenceConfig& e) {
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "evidence"));
  set(f.read_integer("checksum_every", 0, kBig), e.checksum_every);
  set(f.read_boolean("trace"), e.trace);
  set(f.read_boolean("activation_digests"), e.activation_digests);
  set(f.read_number("watchdog_seconds", 0.0, 1e7), e.watchdog_seconds);
  set(f.read_number("memory_budget_mb", 0.0, 1e12), e.memory_budget_mb);
  set(f.read_integer("checkpoint_every", 0, kBig), e.checkpoint_every);
  set(f.read_integer("keep_last", 1, 1 << 20), e.keep_last);
  set(f.read_boolean("stop_on_divergence"), e.stop_on_divergence);
  return finish(f);
}

// [fp16] is present only with fp16 precision (DeepSpeed's "fp16" section).
Status read_fp16(const json& root, std::optional<optim::LossScalerConfig>& out) {
  if (!root.contains("fp16")) return Status();
  optim::LossScalerConfig ls;
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "fp16"));
  set(f.read_integer("initial_scale_power", 0, 64), ls.initial_scale_power);
  set(f.read_integer("loss_scale_window", 1, kBig), ls.window);
  set(f.read_integer("hysteresis", 1, 1 << 20), ls.hysteresis);
  set(f.read_boolean("consecutive_hysteresis"), ls.consecutive_hysteresis);
  set(f.read_number("min_loss_scale", 0.0, 1e300), ls.min_scale);
  SP_RETURN_IF_ERROR(finish(f));
  SP_RETURN_IF_ERROR(ls.validate("fp16"));
  out = ls;
  return Status();
}

Status read_prove(const json& root, ProveConfig& p) {
  SP_ASSIGN_OR_RETURN(JsonFields f, section(root, "prove"));
  set(f.read_string("fault"), p.fault);
  set(f.read_integer("checkpoint_step", 0, kBig), p.checkpoint_step);
  set(f.read_number("eval_margin", 0.0, 100.0), p.eval_margin);
  set(f.read_integer("anchor_every", 0, kBig), p.anchor_every);
  return finish(f);
}

// The record --deepspeed keeps of the ds_config a configuration was mapped from.
Status read_deepspeed_record(const json& root, json& out) {
  if (!root.contains("deepspeed")) return Status();
  const json& d = root.at("deepspeed");
  if (!d.is_object() || !d.contains("sha256") || !d.contains("mapping"))
    return invalid_argument("deepspeed must be the record --deepspeed writes ({{\"file\", \"sha256\", \"mapping\"}})")
        .with_hint("pass the ds_config.json with --deepspeed FILE instead (docs/deepspeed.md)");
  out = d;
  return Status();
}

// The record --model-config keeps (config/hf_config.h), read back from a contract.
Status read_model_config_record(const json& root, json& out) {
  if (!root.contains("model_config")) return Status();
  const json& mc = root.at("model_config");
  if (!mc.is_object() || mc.size() != 3 || !mc.contains("file") || !mc.at("file").is_string() ||
      !mc.contains("sha256") || !mc.at("sha256").is_string() || !mc.contains("mapping") ||
      !mc.at("mapping").is_object())
    return invalid_argument("[model_config] must be {{file, sha256, mapping}} as --model-config records it")
        .with_hint("give a Hugging Face config.json with --model-config FILE instead of writing this section");
  out = mc;
  return Status();
}

}  // namespace

Result<RunConfig> RunConfig::from_json(const json& root) {
  if (!root.is_object()) return invalid_argument("the run configuration must be a table");
  static const std::set<std::string> kSections = {"name",     "model", "train", "parallel",  "data",
                                                  "evidence", "prove", "fp16",  "deepspeed", "model_config"};
  for (const auto& [k, v] : root.items())
    if (!kSections.count(k))
      return invalid_argument("unknown section [{}]", k)
          .with_hint("sections: model, train, parallel, data, evidence, prove, fp16");
  RunConfig c;
  if (root.contains("name")) {
    if (!root.at("name").is_string()) return invalid_argument("name must be a string");
    c.name = root.at("name").get<std::string>();
  }
  // In the order the sections were always read, so that the first problem reported stays the same.
  SP_RETURN_IF_ERROR(read_deepspeed_record(root, c.deepspeed));
  SP_RETURN_IF_ERROR(read_train(root, c.train));
  SP_RETURN_IF_ERROR(read_parallel(root, c.parallel));
  SP_RETURN_IF_ERROR(read_data(root, c.data));
  SP_RETURN_IF_ERROR(read_evidence(root, c.evidence));
  SP_RETURN_IF_ERROR(read_fp16(root, c.fp16));
  // fp16 without an [fp16] table scales the loss with DeepSpeed's defaults, as DeepSpeed does for "fp16":
  // {"enabled": true}; to_json writes them, so the contract records the scaling the run used.
  if (!c.fp16 && c.train.precision.compute == DType::kF16) c.fp16 = optim::LossScalerConfig{};
  SP_RETURN_IF_ERROR(read_prove(root, c.prove));
  SP_RETURN_IF_ERROR(read_model_config_record(root, c.model_config));

  // The model's vocabulary is the tokenizer's: data.vocab_size, unless the model says the same.
  json model = root.contains("model") ? root.at("model") : json::object();
  if (!model.is_object()) return invalid_argument("[model] must be a table");
  if (!model.contains("vocab_size")) model["vocab_size"] = c.data.vocab_size;
  SP_ASSIGN_OR_RETURN(c.model, model::LlamaConfig::from_json(model));
  if (c.model.vocab_size != c.data.vocab_size)
    return invalid_argument("model.vocab_size = {} differs from data.vocab_size = {} (the tokenizer's vocabulary)",
                            c.model.vocab_size, c.data.vocab_size)
        .with_hint("drop model.vocab_size; it is taken from data.vocab_size");
  return c;
}

}  // namespace sp::config

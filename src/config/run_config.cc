#include "config/run_config.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/json_io.h"

namespace sp::config {
namespace {
using nlohmann::json;

json toml_to_json(const toml::node& node) {
  if (auto* t = node.as_table()) {
    json o = json::object();
    for (auto&& [k, v] : *t) o[std::string(k.str())] = toml_to_json(v);
    return o;
  }
  if (auto* a = node.as_array()) {
    json arr = json::array();
    for (auto&& v : *a) arr.push_back(toml_to_json(v));
    return arr;
  }
  if (auto* s = node.as_string()) return s->get();
  if (auto* i = node.as_integer()) return i->get();
  if (auto* f = node.as_floating_point()) return f->get();
  if (auto* b = node.as_boolean()) return b->get();
  if (auto* d = node.as_date()) return fmt::format("{:04}-{:02}-{:02}", d->get().year, d->get().month, d->get().day);
  return json("<unsupported TOML value>");
}

// Reads one section's fields strictly. Each field: key, a reader that checks the type and range.
class SectionReader {
 public:
  SectionReader(const json& root, std::string section) : section_(std::move(section)) {
    if (root.contains(section_)) {
      node_ = &root.at(section_);
      if (!node_->is_object()) error_ = invalid_argument("[{}] must be a table", section_);
    }
  }
  template <typename T>
  void integer(const char* key, T& out, int64_t lo, int64_t hi) {
    const json* v = take(key);
    if (!v) return;
    if (!v->is_number_integer()) return fail(key, fmt::format("must be an integer, got {}", v->dump()));
    const auto x = v->get<int64_t>();
    if (x < lo || x > hi) return fail(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
    out = static_cast<T>(x);
  }
  void number(const char* key, double& out, double lo, double hi) {
    const json* v = take(key);
    if (!v) return;
    if (!v->is_number()) return fail(key, fmt::format("must be a number, got {}", v->dump()));
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) return fail(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
    out = x;
  }
  void boolean(const char* key, bool& out) {
    const json* v = take(key);
    if (!v) return;
    if (!v->is_boolean()) return fail(key, fmt::format("must be true or false, got {}", v->dump()));
    out = v->get<bool>();
  }
  void string(const char* key, std::string& out) {
    const json* v = take(key);
    if (!v) return;
    if (!v->is_string()) return fail(key, fmt::format("must be a string, got {}", v->dump()));
    out = v->get<std::string>();
  }
  template <typename E>
  void choice(const char* key, E& out, const std::map<std::string, E>& options) {
    std::string s;
    const json* v = take(key);
    if (!v) return;
    if (!v->is_string()) return fail(key, fmt::format("must be a string, got {}", v->dump()));
    s = v->get<std::string>();
    auto it = options.find(s);
    if (it == options.end()) {
      std::string names;
      for (const auto& [n, e] : options) names += (names.empty() ? "" : ", ") + n;
      return fail(key, fmt::format("= \"{}\" is not one of: {}", s, names));
    }
    out = it->second;
  }
  // All keys must have been read; otherwise "unknown key".
  Status finish() {
    if (!error_.ok()) return error_;
    if (node_)
      for (const auto& [k, v] : node_->items())
        if (!seen_.count(k)) {
          std::string known;
          for (const auto& s : seen_all_) known += (known.empty() ? "" : ", ") + s;
          return invalid_argument("unknown key {}.{}", section_, shown_key(k))
              .with_hint("known keys in [" + section_ + "]: " + known);
        }
    return Status();
  }

 private:
  const json* take(const char* key) {
    seen_all_.insert(key);
    if (!node_ || !node_->is_object() || !node_->contains(key)) return nullptr;
    seen_.insert(key);
    return &node_->at(key);
  }
  void fail(const char* key, const std::string& what) {
    if (error_.ok()) error_ = invalid_argument("{}.{} {}", section_, key, what);
  }
  std::string section_;
  const json* node_ = nullptr;
  std::set<std::string> seen_, seen_all_;
  Status error_;
};
// The keys present in one section of the configuration.
std::set<std::string> present_keys(const json& root, const std::string& section) {
  std::set<std::string> keys;
  if (root.contains(section) && root.at(section).is_object())
    for (const auto& [k, v] : root.at(section).items()) keys.insert(k);
  return keys;
}
}  // namespace

std::string schedule_name(Schedule s) {
  switch (s) {
    case Schedule::kGpipe:
      return "gpipe";
    case Schedule::k1F1B:
      return "1f1b";
    case Schedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}
std::string reduction_name(Reduction r) { return r == Reduction::kDeterministic ? "deterministic" : "fast"; }
std::string architecture_name(Architecture a) { return a == Architecture::kAllReduce ? "allreduce" : "ps"; }
std::string staleness_schedule_name(StalenessSchedule s) { return s == StalenessSchedule::kFixed ? "fixed" : "free"; }

optim::LrSchedule TrainConfig::schedule() const {
  optim::LrSchedule s{
      .kind = lr_schedule, .lr = lr, .min_lr = min_lr, .warmup_steps = warmup_steps, .total_steps = steps};
  if (lr_schedule == optim::LrScheduleKind::kCosine) return s;
  s.total_steps = schedule_steps > 0 ? schedule_steps : steps;
  s.warmup_type = warmup_type;
  s.warmup_min_lr = warmup_min_lr;
  s.warmup_min_ratio = warmup_min_ratio;
  s.cos_min_ratio = cos_min_ratio;
  return s;
}

json RunConfig::to_json() const {
  json m = model.to_json();
  json j = {
      {"name", name},
      {"model", m},
      {"train",
       {{"seed", train.seed},
        {"steps", train.steps},
        {"global_batch", train.global_batch},
        {"micro_batch_size", train.micro_batch_size},
        {"seq_len", train.seq_len},
        {"lr", train.lr},
        {"min_lr", train.min_lr},
        {"warmup_steps", train.warmup_steps},
        {"weight_decay", train.weight_decay},
        {"beta1", train.beta1},
        {"beta2", train.beta2},
        {"eps", train.eps},
        {"grad_clip", train.grad_clip},
        {"eval_every", train.eval_every},
        {"eval_batches", train.eval_batches},
        {"recompute", train.recompute == model::Recompute::kFull ? "full" : "none"}}},
      {"parallel",
       {{"dp", parallel.dp},
        {"tp", parallel.tp},
        {"pp", parallel.pp},
        {"zero", parallel.zero},
        {"schedule", schedule_name(parallel.schedule)},
        {"virtual_stages", parallel.virtual_stages},
        {"reduction", reduction_name(parallel.reduction)},
        {"axis_order", parallel.axis_order},
        {"blas_threads", parallel.blas_threads}}},
      {"data",
       {{"sources", data.sources},
        {"vocab_size", data.vocab_size},
        {"eval_fraction", data.eval_fraction},
        {"seed", data.seed}}},
      {"evidence",
       {{"checksum_every", evidence.checksum_every},
        {"trace", evidence.trace},
        {"activation_digests", evidence.activation_digests},
        {"watchdog_seconds", evidence.watchdog_seconds},
        {"memory_budget_mb", evidence.memory_budget_mb},
        {"checkpoint_every", evidence.checkpoint_every},
        {"keep_last", evidence.keep_last},
        {"stop_on_divergence", evidence.stop_on_divergence}}},
      {"prove",
       {{"fault", prove.fault},
        {"checkpoint_step", prove.checkpoint_step},
        {"eval_margin", prove.eval_margin},
        {"anchor_every", prove.anchor_every}}},
  };
  // The DeepSpeed schedule keys appear only with a DeepSpeed schedule, so a cosine contract is unchanged.
  if (train.lr_schedule != optim::LrScheduleKind::kCosine) {
    j["train"]["lr_schedule"] = optim::lr_schedule_name(train.lr_schedule);
    j["train"]["warmup_type"] = optim::warmup_type_name(train.warmup_type);
    j["train"]["warmup_min_lr"] = train.warmup_min_lr;
    j["train"]["warmup_min_ratio"] = train.warmup_min_ratio;
    j["train"]["cos_min_ratio"] = train.cos_min_ratio;
    j["train"]["schedule_steps"] = train.schedule_steps;
  }
  // The mixed-precision keys appear only in 16-bit precision, so an fp32 contract is unchanged.
  if (train.precision.mixed()) {
    j["train"]["precision"] = model::precision_name(train.precision.compute);
    j["train"]["grad_dtype"] = model::precision_name(train.precision.grad);
    j["train"]["gemm16"] = kernels::gemm16_kind_name(train.gemm16);
  }
  if (fp16)
    j["fp16"] = {{"initial_scale_power", fp16->initial_scale_power},
                 {"loss_scale_window", fp16->window},
                 {"hysteresis", fp16->hysteresis},
                 {"consecutive_hysteresis", fp16->consecutive_hysteresis},
                 {"min_loss_scale", fp16->min_scale}};
  if (!deepspeed.is_null()) j["deepspeed"] = deepspeed;
  // The parameter-server keys appear only when they are on, so an all-reduce contract is unchanged.
  if (parallel.parameter_server()) {
    j["parallel"]["architecture"] = architecture_name(parallel.architecture);
    j["parallel"]["servers"] = parallel.servers;
    j["parallel"]["staleness"] = parallel.staleness;
    j["parallel"]["staleness_schedule"] = staleness_schedule_name(parallel.staleness_schedule);
  }
  if (parallel.replay_workers > 0) {
    j["parallel"]["replay_workers"] = parallel.replay_workers;
    j["parallel"]["staleness"] = parallel.staleness;
  }
  if (!model_config.is_null()) j["model_config"] = model_config;  // absent without --model-config
  return j;
}

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
  constexpr int64_t kBig = int64_t{1} << 40;
  if (root.contains("deepspeed")) {
    const json& d = root.at("deepspeed");
    if (!d.is_object() || !d.contains("sha256") || !d.contains("mapping"))
      return invalid_argument("deepspeed must be the record --deepspeed writes ({{\"file\", \"sha256\", \"mapping\"}})")
          .with_hint("pass the ds_config.json with --deepspeed FILE instead (docs/deepspeed.md)");
    c.deepspeed = d;
  }

  SectionReader t(root, "train");
  t.integer("seed", c.train.seed, 0, INT64_MAX);
  t.integer("steps", c.train.steps, 1, kBig);
  t.integer("global_batch", c.train.global_batch, 1, kBig);
  t.integer("micro_batch_size", c.train.micro_batch_size, 1, kBig);
  t.integer("seq_len", c.train.seq_len, 1, kBig);
  t.number("lr", c.train.lr, 0.0, 10.0);
  t.number("min_lr", c.train.min_lr, 0.0, 10.0);
  t.integer("warmup_steps", c.train.warmup_steps, 0, kBig);
  t.number("weight_decay", c.train.weight_decay, 0.0, 10.0);
  t.number("beta1", c.train.beta1, 0.0, 0.999999);
  t.number("beta2", c.train.beta2, 0.0, 0.999999999);
  t.number("eps", c.train.eps, 1e-30, 1.0);
  t.number("grad_clip", c.train.grad_clip, 0.0, 1e30);
  t.integer("eval_every", c.train.eval_every, 0, kBig);
  t.integer("eval_batches", c.train.eval_batches, 0, kBig);
  t.choice("recompute", c.train.recompute, {{"none", model::Recompute::kNone}, {"full", model::Recompute::kFull}});
  std::string precision = "fp32", grad_dtype = "fp32", gemm16 = "auto", lr_schedule = "cosine";
  t.string("precision", precision);
  t.string("grad_dtype", grad_dtype);
  t.string("gemm16", gemm16);
  t.string("lr_schedule", lr_schedule);
  const std::set<std::string> train_keys = present_keys(root, "train");
  t.choice("warmup_type", c.train.warmup_type,
           {{"log", optim::WarmupType::kLog}, {"linear", optim::WarmupType::kLinear}});
  t.number("warmup_min_lr", c.train.warmup_min_lr, 0.0, 10.0);
  t.number("warmup_min_ratio", c.train.warmup_min_ratio, 0.0, 1.0);
  t.number("cos_min_ratio", c.train.cos_min_ratio, 0.0, 1.0);
  t.integer("schedule_steps", c.train.schedule_steps, 0, kBig);
  SP_RETURN_IF_ERROR(t.finish());
  SP_ASSIGN_OR_RETURN(c.train.lr_schedule, optim::lr_schedule_from_name(lr_schedule));
  if (c.train.lr_schedule == optim::LrScheduleKind::kCosine)
    for (const char* k : {"warmup_type", "warmup_min_lr", "warmup_min_ratio", "cos_min_ratio", "schedule_steps"})
      if (train_keys.count(k))
        return invalid_argument(
                   "train.{} is a parameter of DeepSpeed's schedules, not of train.lr_schedule = \"cosine\"", k)
            .with_hint(
                "set train.lr_schedule = \"warmup_lr\", \"warmup_decay_lr\" or \"warmup_cosine_lr\", or drop it");
  SP_ASSIGN_OR_RETURN(c.train.precision, model::precision_from_names(precision, grad_dtype));
  auto gemm16_kind = kernels::gemm16_kind_from_name(gemm16);
  if (!gemm16_kind.ok())
    return invalid_argument("train.gemm16 = \"{}\" is not a 16-bit GEMM backend", gemm16)
        .with_hint("use \"auto\", \"onednn\" or \"fallback\" (docs/kernels.md §\"The 16-bit GEMM\")");
  c.train.gemm16 = *gemm16_kind;

  SectionReader p(root, "parallel");
  p.integer("dp", c.parallel.dp, 1, 1 << 20);
  p.integer("tp", c.parallel.tp, 1, 1 << 20);
  p.integer("pp", c.parallel.pp, 1, 1 << 20);
  p.integer("zero", c.parallel.zero, 0, 3);
  p.choice("schedule", c.parallel.schedule,
           {{"gpipe", Schedule::kGpipe}, {"1f1b", Schedule::k1F1B}, {"interleaved", Schedule::kInterleaved}});
  p.integer("virtual_stages", c.parallel.virtual_stages, 1, 1 << 10);
  p.choice("reduction", c.parallel.reduction,
           {{"deterministic", Reduction::kDeterministic}, {"fast", Reduction::kFast}});
  p.string("axis_order", c.parallel.axis_order);
  p.integer("blas_threads", c.parallel.blas_threads, 1, 1024);
  p.choice("architecture", c.parallel.architecture,
           {{"allreduce", Architecture::kAllReduce}, {"ps", Architecture::kParameterServer}});
  p.integer("servers", c.parallel.servers, 0, 1 << 20);
  p.integer("staleness", c.parallel.staleness, 0, 1 << 20);
  p.choice("staleness_schedule", c.parallel.staleness_schedule,
           {{"fixed", StalenessSchedule::kFixed}, {"free", StalenessSchedule::kFree}});
  p.integer("replay_workers", c.parallel.replay_workers, 0, 1 << 20);
  SP_RETURN_IF_ERROR(p.finish());

  SectionReader d(root, "data");
  d.string("sources", c.data.sources);
  d.integer("vocab_size", c.data.vocab_size, 1, int64_t{1} << 31);
  d.number("eval_fraction", c.data.eval_fraction, 0.0, 0.5);
  d.integer("seed", c.data.seed, 0, INT64_MAX);
  SP_RETURN_IF_ERROR(d.finish());

  SectionReader e(root, "evidence");
  e.integer("checksum_every", c.evidence.checksum_every, 0, kBig);
  e.boolean("trace", c.evidence.trace);
  e.boolean("activation_digests", c.evidence.activation_digests);
  e.number("watchdog_seconds", c.evidence.watchdog_seconds, 0.0, 1e7);
  e.number("memory_budget_mb", c.evidence.memory_budget_mb, 0.0, 1e12);
  e.integer("checkpoint_every", c.evidence.checkpoint_every, 0, kBig);
  e.integer("keep_last", c.evidence.keep_last, 1, 1 << 20);
  e.boolean("stop_on_divergence", c.evidence.stop_on_divergence);
  SP_RETURN_IF_ERROR(e.finish());

  if (root.contains("fp16")) {
    optim::LossScalerConfig ls;
    SectionReader f(root, "fp16");
    f.integer("initial_scale_power", ls.initial_scale_power, 0, 64);
    f.integer("loss_scale_window", ls.window, 1, kBig);
    f.integer("hysteresis", ls.hysteresis, 1, 1 << 20);
    f.boolean("consecutive_hysteresis", ls.consecutive_hysteresis);
    f.number("min_loss_scale", ls.min_scale, 0.0, 1e300);
    SP_RETURN_IF_ERROR(f.finish());
    SP_RETURN_IF_ERROR(ls.validate("fp16"));
    c.fp16 = ls;
  }
  // fp16 without an [fp16] table scales the loss with DeepSpeed's defaults, as DeepSpeed does for "fp16":
  // {"enabled": true}; to_json writes them, so the contract records the scaling the run used.
  if (!c.fp16 && c.train.precision.compute == DType::kF16) c.fp16 = optim::LossScalerConfig{};

  SectionReader pr(root, "prove");
  pr.string("fault", c.prove.fault);
  pr.integer("checkpoint_step", c.prove.checkpoint_step, 0, kBig);
  pr.number("eval_margin", c.prove.eval_margin, 0.0, 100.0);
  pr.integer("anchor_every", c.prove.anchor_every, 0, kBig);
  SP_RETURN_IF_ERROR(pr.finish());

  if (root.contains("model_config")) {  // written by --model-config (config/hf_config.h), read back from a contract
    const json& mc = root.at("model_config");
    if (!mc.is_object() || mc.size() != 3 || !mc.contains("file") || !mc.at("file").is_string() ||
        !mc.contains("sha256") || !mc.at("sha256").is_string() || !mc.contains("mapping") ||
        !mc.at("mapping").is_object())
      return invalid_argument("[model_config] must be {{file, sha256, mapping}} as --model-config records it")
          .with_hint("give a Hugging Face config.json with --model-config FILE instead of writing this section");
    c.model_config = mc;
  }

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

Result<json> read_toml(const std::string& path) {
  try {
    toml::table t = toml::parse_file(path);
    return toml_to_json(t);
  } catch (const toml::parse_error& e) {
    const auto& src = e.source();
    // A configuration named by the user that is not there is a usage error (exit 2), like a bad key.
    if (!std::filesystem::exists(path))
      return invalid_argument("config file '{}' does not exist", path).with_hint("check the path");
    return invalid_argument("{}:{}:{}: {}", path, src.begin.line, src.begin.column, e.description());
  }
}

Status apply_override(json& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return invalid_argument("--set '{}' is not of the form section.key=value", assignment)
        .with_hint("for example --set parallel.dp=4 or --set train.lr=1e-3");
  const std::string section = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string text = assignment.substr(eq + 1);
  json value;
  try {
    toml::table t = toml::parse("v = " + text);
    value = toml_to_json(*t.get("v"));
  } catch (const toml::parse_error&) {
    value = text;  // a bare word is a string: --set parallel.schedule=gpipe
  }
  if (key.empty()) return invalid_argument("--set '{}' has an empty key", assignment);
  if (!config.contains(section)) config[section] = json::object();
  config[section][key] = value;
  return Status();
}

Result<json> read_preset(const std::string& configs_dir, const std::string& name) {
  const std::string path = configs_dir + "/" + name + ".toml";
  if (!std::filesystem::exists(path)) {
    std::string names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(configs_dir, ec))
      if (entry.path().extension() == ".toml") names += (names.empty() ? "" : ", ") + entry.path().stem().string();
    return invalid_argument("no preset named '{}' in {}", name, configs_dir)
        .with_hint(names.empty() ? "no presets found; pass --config FILE" : "presets: " + names);
  }
  SP_ASSIGN_OR_RETURN(json j, read_toml(path));
  if (!j.contains("name")) j["name"] = name;
  return j;
}

}  // namespace sp::config

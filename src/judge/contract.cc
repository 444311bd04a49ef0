// contract.json of a recording (docs/formats/torch_recording.md §contract.json), read strictly: every field is
// checked for what the judge can apply — ranges first (a beta of 1e300 or a negative weight decay is refused
// naming the field, never judged into a -nan), then the hash (an edited file), then the model through the
// engine's Hugging Face reader. The strategy's name must not say another strategy than its grid; a schedule
// declared as data is parsed (LrSchedule). Format 1 (anchors) and 2 (every step) are both read.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numbers>
#include <regex>

#include "core/hash.h"
#include "core/json_io.h"
#include "judge/contract_strategy.h"
#include "judge/records.h"

namespace sp::judge {
using json = nlohmann::json;
namespace {

constexpr int64_t kMaxSteps = int64_t{1} << 30;

// A refused declaration: exit 2, with the fix.
Status declared(const Status& s) {
  return invalid_argument("{}", s.message())
      .with_hint(
          "contract.json is what the Recorder was given: record the run again with a declaration the judge can "
          "apply (docs/formats/torch_recording.md §contract.json)");
}

Result<double> ranged(const JsonFields& f, const json& o, std::string_view key, double lo, double hi, bool lo_open,
                      bool hi_open) {
  const json& v = o.at(key);
  if (!v.is_number()) return f.error(key, fmt::format("must be a number, got {}", v.dump().substr(0, 40)));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo) || (hi_open && x == hi))
    return f.error(key, fmt::format("= {} is outside {}{}, {}{}", v.dump().substr(0, 40), lo_open ? "(" : "[", lo, hi,
                                    hi_open ? ")" : "]"));
  return x;
}

Result<LrSchedule> schedule_of(const JsonFields& of, const json& v) {
  const JsonFields f(v, "contract.json", "optimizer.lr_schedule");
  SP_RETURN_IF_ERROR(f.expect_keys({"kind", "lr", "warmup_steps", "total_steps", "min_ratio", "warmup_start"}));
  LrSchedule s;
  SP_ASSIGN_OR_RETURN(s.kind, f.string("kind"));
  if (s.kind != "constant" && s.kind != "linear" && s.kind != "cosine")
    return f.error("kind", fmt::format("= \"{}\": one of constant, linear, cosine", s.kind.substr(0, 40)));
  SP_ASSIGN_OR_RETURN(s.lr, ranged(f, v, "lr", 0, 1e30, false, false));
  SP_ASSIGN_OR_RETURN(s.min_ratio, ranged(f, v, "min_ratio", 0, 1, false, false));
  SP_ASSIGN_OR_RETURN(s.warmup_steps, f.integer("warmup_steps", 0, kMaxSteps));
  SP_ASSIGN_OR_RETURN(s.total_steps, f.integer("total_steps", 1, kMaxSteps));
  SP_ASSIGN_OR_RETURN(s.warmup_start, f.integer("warmup_start", 0, 1));
  (void)of;
  return s;
}

// The strategy-name vocabulary (python/shardproof_torch/declared.py NAME_TOKENS): token → (what, value). FSDP
// shards the parameters (ZeRO-3), or keeps them gathered after forward (FSDP2's reshard_after_forward=False,
// FSDP1's SHARD_GRAD_OP: ZeRO-2): "sharded" is either.
struct NameRule {
  std::string_view token, what;
  int value;
};
constexpr NameRule kNameRules[] = {
    {"single", "world", 1}, {"ddp", "dp", 0},        {"dp", "dp", 0},       {"tp", "tp", 0},
    {"megatron", "tp", 0},  {"pp", "pp", 0},         {"pipeline", "pp", 0}, {"gpipe", "pp", 0},
    {"1f1b", "pp", 0},      {"zero1", "zero", 1},    {"zero2", "zero", 2},  {"zero3", "zero", 3},
    {"fsdp", "sharded", 2}, {"fsdp2", "sharded", 2}, {"full", "zero", 3},   {"hsdp", "sharded", 2}};

}  // namespace

std::string strategy_name_problem(const std::string& name, int dp, int tp, int pp, int zero) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  static const std::regex split("[-_+./ ]+");
  for (std::sregex_token_iterator it(lower.begin(), lower.end(), split, -1), end; it != end; ++it) {
    const std::string token = *it;
    for (const NameRule& r : kNameRules) {
      if (token != r.token) continue;
      const int axis = r.what == "dp" ? dp : r.what == "tp" ? tp : r.what == "pp" ? pp : 0;
      if (r.what == "world" && dp * tp * pp != 1)
        return fmt::format("says '{}' (one process), but the grid has {} ranks", token, dp * tp * pp);
      if ((r.what == "dp" || r.what == "tp" || r.what == "pp") && axis < 2)
        return fmt::format("says '{}', but the grid declares {} = 1", token, r.what);
      if (r.what == "zero" && zero != r.value)
        return fmt::format("says '{}' (ZeRO stage {}), but the strategy declares zero = {}", token, r.value, zero);
      if (r.what == "sharded" && zero < 2)
        return fmt::format("says '{}' (ZeRO stage 2 or 3), but the strategy declares zero = {}", token, zero);
    }
  }
  return {};
}

double LrSchedule::at(int64_t step) const {
  double f = 1.0;
  if (step < warmup_steps) {
    f = static_cast<double>(step + warmup_start) / static_cast<double>(std::max<int64_t>(1, warmup_steps));
  } else if (kind == "linear") {
    f = std::max(0.0, static_cast<double>(total_steps - step) /
                          static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps)));
    if (min_ratio != 0) f = f * (1.0 - min_ratio) + min_ratio;
  } else if (kind == "cosine") {
    const double progress = static_cast<double>(step - warmup_steps) /
                            static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
    f = 0.5 * (1.0 + std::cos(std::numbers::pi * 0.5 * 2.0 * progress));
    f = std::max(0.0, min_ratio == 0 ? f : f * (1.0 - min_ratio) + min_ratio);
  }
  return lr * f;
}

std::string LrSchedule::to_string() const {
  return fmt::format("{}, lr {:.6g}, warmup {}{}, {} steps{}", kind, lr, warmup_steps, warmup_start ? " (from 1)" : "",
                     total_steps, min_ratio != 0 ? fmt::format(", min {:.6g}", min_ratio) : "");
}

bool RecordingContract::decays(const std::string& tensor) const {
  return std::find(no_decay.begin(), no_decay.end(), tensor) == no_decay.end();
}

namespace {

Status strategy_and_batch(const JsonFields& f, const json& doc, const std::string& label, RecordingContract& c) {
  SP_ASSIGN_OR_RETURN(const json* st, f.object("strategy"));
  const JsonFields sf(*st, label, "strategy");
  // The grid's keys, and what a framework's layout adds: FSDP2's units or DeepSpeed's config, DTensor's tp plan.
  for (const char* k : {"name", "dp", "tp", "pp", "zero"})
    if (!st->contains(k)) return sf.error(k, "is missing");
  for (const auto& [k, _] : st->items())
    if (k != "name" && k != "dp" && k != "tp" && k != "pp" && k != "zero" && k != "units" && k != "deepspeed" &&
        k != "tp_plan")
      return sf.error(k, "is not a strategy key (name, dp, tp, pp, zero, units, deepspeed, tp_plan)");
  if (st->contains("units") && st->contains("deepspeed"))
    return sf.error("deepspeed", "and units are two frameworks' ZeRO: a run has one");
  SP_ASSIGN_OR_RETURN(c.strategy_name, sf.string("name"));
  SP_ASSIGN_OR_RETURN(const int64_t dp, sf.integer("dp", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(const int64_t tp, sf.integer("tp", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(const int64_t pp, sf.integer("pp", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(const int64_t zero, sf.integer("zero", 0, 3));
  plan::Strategy& s = c.strategy;
  s.dp = static_cast<int>(dp), s.tp = static_cast<int>(tp), s.pp = static_cast<int>(pp);
  s.zero = static_cast<int>(zero);
  if (st->contains("units")) {
    SP_ASSIGN_OR_RETURN(c.units, units_of(sf, st->at("units"), s.zero));
  }
  if (st->contains("deepspeed")) {
    SP_ASSIGN_OR_RETURN(c.deepspeed, deepspeed_of(sf, st->at("deepspeed"), s.zero));
  }
  if (st->contains("tp_plan")) {
    SP_ASSIGN_OR_RETURN(c.tp_plan, sf.string("tp_plan"));
    if (c.tp_plan != "dtensor" && c.tp_plan != "dtensor-sequence-parallel")
      return sf.error("tp_plan",
                      fmt::format("= \"{}\": \"dtensor\" or \"dtensor-sequence-parallel\"", c.tp_plan.substr(0, 60)));
    if (s.tp < 2) return sf.error("tp_plan", fmt::format("is DTensor's tensor parallelism, but tp = {}", s.tp));
  }
  if (const std::string why = strategy_name_problem(c.strategy_name, s.dp, s.tp, s.pp, s.zero); !why.empty())
    return sf.error("name", fmt::format("\"{}\" {}", c.strategy_name.substr(0, 60), why));
  SP_ASSIGN_OR_RETURN(const int64_t world, f.integer("world_size", 1, 1 << 20));
  c.world = static_cast<int>(world);
  if (c.world != s.workers())
    return f.error("world_size", fmt::format("= {} ≠ dp {} × tp {} × pp {}", c.world, s.dp, s.tp, s.pp));
  SP_ASSIGN_OR_RETURN(const json* batch, f.object("batch"));
  const JsonFields bf(*batch, label, "batch");
  SP_RETURN_IF_ERROR(bf.expect_keys({"micro_batch", "micro_batches", "seq_len"}));
  SP_ASSIGN_OR_RETURN(s.micro_batch_size, bf.integer("micro_batch", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(c.micro_batches, bf.integer("micro_batches", 1, 1 << 20));
  SP_ASSIGN_OR_RETURN(c.seq_len, bf.integer("seq_len", 1, 1 << 20));
  if (c.micro_batches % s.dp != 0)
    return f.error("batch", fmt::format("micro_batches {} is not a multiple of dp {}", c.micro_batches, s.dp));
  const bool v2 = c.every_step();
  SP_ASSIGN_OR_RETURN(c.steps, f.integer("steps", 1, kMaxSteps));
  SP_ASSIGN_OR_RETURN(c.checksum_every, f.integer("checksum_every", v2 ? 1 : 0, v2 ? 1 : c.steps));
  if (!v2) {
    SP_ASSIGN_OR_RETURN(const json* a, f.array("anchors"));
    for (const json& s : *a) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() >= c.steps ||
          (!c.anchors.empty() && s.get<int64_t>() <= c.anchors.back()))
        return f.error("anchors", fmt::format("holds {}: increasing steps in [0, {})", s.dump(), c.steps));
      c.anchors.push_back(s.get<int64_t>());
    }
  }
  (void)doc;
  return Status();
}

Status optimizer_and_loss(const JsonFields& f, const std::string& label, RecordingContract& c) {
  const bool v2 = c.every_step();
  SP_ASSIGN_OR_RETURN(const json* opt, f.object("optimizer"));
  const JsonFields of(*opt, label, "optimizer");
  SP_RETURN_IF_ERROR(v2 ? of.expect_keys({"name", "lr_schedule", "betas", "eps", "weight_decay", "no_decay",
                                          "max_grad_norm", "implementation", "arithmetic", "sqrt"})
                        : of.expect_keys({"name", "lr_schedule", "betas", "eps", "weight_decay", "no_decay",
                                          "max_grad_norm", "implementation"}));
  SP_ASSIGN_OR_RETURN(const std::string name, of.string("name"));
  if (name != "adamw") return of.error("name", fmt::format("= \"{}\": the judge knows AdamW only", name));
  const json& betas = opt->at("betas");
  if (!betas.is_array() || betas.size() != 2) return of.error("betas", "must be [beta1, beta2]");
  const json named = {{"beta1", betas[0]}, {"beta2", betas[1]}};
  const JsonFields bf(named, label, "optimizer.betas");
  SP_ASSIGN_OR_RETURN(c.beta1, ranged(bf, named, "beta1", 0, 1, false, true));
  SP_ASSIGN_OR_RETURN(c.beta2, ranged(bf, named, "beta2", 0, 1, false, true));
  SP_ASSIGN_OR_RETURN(c.eps, ranged(of, *opt, "eps", 0, 1, true, false));
  SP_ASSIGN_OR_RETURN(c.weight_decay, ranged(of, *opt, "weight_decay", 0, 1e6, false, false));
  SP_ASSIGN_OR_RETURN(c.max_grad_norm, ranged(of, *opt, "max_grad_norm", 0, 1e30, false, false));
  SP_ASSIGN_OR_RETURN(c.implementation, of.string("implementation"));
  SP_ASSIGN_OR_RETURN(const json* nd, of.array("no_decay"));
  for (const json& n : *nd) {
    if (!n.is_string()) return of.error("no_decay", "must list tensor names");
    c.no_decay.push_back(n.get<std::string>());
  }
  const json& sched = opt->at("lr_schedule");
  if (sched.is_string()) {
    c.schedule_text = sched.get<std::string>();
  } else if (sched.is_object()) {
    SP_ASSIGN_OR_RETURN(c.schedule, schedule_of(of, sched));
    c.schedule_text = c.schedule->to_string();
  } else {
    return of.error("lr_schedule", "must be text or a schedule object");
  }
  if (v2) {
    SP_ASSIGN_OR_RETURN(const std::string a, of.string("arithmetic"));
    if (a == kernels::adamw_arithmetic_name(kernels::AdamWArithmetic::kMulAdd))
      c.arithmetic = kernels::AdamWArithmetic::kMulAdd;
    else if (a == kernels::adamw_arithmetic_name(kernels::AdamWArithmetic::kLerp))
      c.arithmetic = kernels::AdamWArithmetic::kLerp;
    else
      return of.error("arithmetic",
                      fmt::format("= \"{}\": torch1-mul-add or torch2-lerp (kernels/adamw.h)", a.substr(0, 40)));
    SP_ASSIGN_OR_RETURN(const std::string root, of.string("sqrt"));
    if (root != "correctly-rounded" && root != "recorded")
      return of.error("sqrt", fmt::format("= \"{}\": correctly-rounded or recorded", root.substr(0, 40)));
    c.sqrt_recorded = root == "recorded";
  }
  SP_ASSIGN_OR_RETURN(const json* loss, f.object("loss"));
  const JsonFields lf(*loss, label, "loss");
  SP_RETURN_IF_ERROR(lf.expect_keys({"reduction", "gradient_divisor"}));
  SP_ASSIGN_OR_RETURN(c.loss_reduction, lf.string("reduction"));
  if (c.loss_reduction != "token_mean" && c.loss_reduction != "micro_batch_mean")
    return lf.error("reduction", "must be \"token_mean\" or \"micro_batch_mean\"");
  if (!loss->at("gradient_divisor").is_number_integer())
    return lf.error("gradient_divisor",
                    fmt::format("= {}: an integer >= 1, what the framework divides gradients by when it "
                                "synchronizes them (DDP and FSDP average: dp; 1 if it sums)",
                                loss->at("gradient_divisor").dump().substr(0, 40)));
  SP_ASSIGN_OR_RETURN(c.gradient_divisor, lf.integer("gradient_divisor", 1, 1 << 20));
  return Status();
}

// precision.grad_scaler: false, or (with fp16 autocast, which needs one) torch's GradScaler as recording.h's
// GradScalerSpec accepts it: growth 2, backoff 1/2, a power-of-two initial scale.
Status grad_scaler(const JsonFields& pf, const std::string& label, const json& p, RecordingContract& c) {
  const json& g = p.at("grad_scaler");
  if (g == false) {
    if (c.autocast_fp16)
      return pf.error("grad_scaler",
                      "is false with fp16 autocast: fp16 gradients need a GradScaler (record it: "
                      "Recorder.attach(..., grad_scaler=scaler))");
    return Status();
  }
  if (!c.autocast_fp16)
    return pf.error("grad_scaler", "is only judged with autocast \"float16\" (bf16 and fp32 need no loss scale)");
  SP_ASSIGN_OR_RETURN(const json* o, pf.object("grad_scaler"));
  const JsonFields gf(*o, label, "precision.grad_scaler");
  SP_RETURN_IF_ERROR(gf.expect_keys({"init_scale", "growth_factor", "backoff_factor", "growth_interval"}));
  for (const auto& [key, want] : {std::pair{"growth_factor", 2.0}, std::pair{"backoff_factor", 0.5}})
    if (!o->at(key).is_number() || o->at(key).get<double>() != want)
      return gf.error(key, fmt::format("= {}: the judge checks GradScaler's default {} (its rule is the engine's "
                                       "loss scaler's)",
                                       o->at(key).dump().substr(0, 40), want));
  const json& init = o->at("init_scale");
  int exponent = 0;
  if (!init.is_number() || !(init.get<double>() > 0) || std::frexp(init.get<double>(), &exponent) != 0.5 ||
      exponent - 1 < 0 || exponent - 1 > 64)
    return gf.error("init_scale", fmt::format("= {}: a power of two in [1, 2^64]", init.dump().substr(0, 40)));
  SP_ASSIGN_OR_RETURN(const int64_t interval, gf.integer("growth_interval", 1, int64_t{1} << 40));
  c.grad_scaler = GradScalerSpec{.init_scale = init.get<double>(), .growth_interval = interval};
  return Status();
}

// Format 2 declares what the recorder checked: fp32 CPU parameters and gradients, autocast off, to bf16 (the
// reference then runs the engine's bf16 casts) or to fp16 with its GradScaler; and the lanes of the norm kernel the
// clip-norm bound assumes (judge/context.cc, clip_norm_tolerance).
Status precision(const JsonFields& f, const std::string& label, RecordingContract& c) {
  SP_ASSIGN_OR_RETURN(const json* p, f.object("precision"));
  const JsonFields pf(*p, label, "precision");
  std::vector<std::string_view> keys = {"params", "grads", "device", "autocast", "grad_scaler"};
  for (const char* optional : {"norm_lanes", "param_dtype", "probe"})
    if (p->contains(optional)) keys.push_back(optional);
  SP_RETURN_IF_ERROR(pf.expect_keys(keys));
  if (p->contains("param_dtype")) {
    if (p->at("param_dtype") != "bfloat16")
      return pf.error("param_dtype", "must be \"bfloat16\" (FSDP2's MixedPrecisionPolicy), or absent (fp32)");
    c.param_bf16 = true;
  }
  if (p->contains("norm_lanes")) {
    SP_ASSIGN_OR_RETURN(c.norm_lanes, pf.integer("norm_lanes", 1, 64));
  }
  for (const char* k : {"params", "grads"}) {
    SP_ASSIGN_OR_RETURN(const std::string d, pf.string(k));
    if (d != "float32") return pf.error(k, fmt::format("= \"{}\": the judge reads float32 (issue 44: bf16)", d));
  }
  SP_ASSIGN_OR_RETURN(const std::string device, pf.string("device"));
  if (device != "cpu") return pf.error("device", fmt::format("= \"{}\": the judge reads CPU tensors", device));
  const json& autocast = p->at("autocast");
  if (autocast == "bfloat16")
    c.autocast_bf16 = true;
  else if (autocast == "float16")
    c.autocast_fp16 = true;
  else if (autocast != false)
    return pf.error("autocast", fmt::format("= {}: false, \"bfloat16\" or \"float16\" (torch.autocast's dtype)",
                                            autocast.dump().substr(0, 40)));
  if ((c.autocast_bf16 || c.autocast_fp16) && c.param_bf16)
    return pf.error("param_dtype", "and autocast are both 16-bit: one 16-bit regime per recording");
  if (p->contains("probe")) {
    if (p->at("probe") != "model.layers.0.self_attn.q_proj" || !c.autocast_bf16)
      return pf.error("probe", "must be \"model.layers.0.self_attn.q_proj\", with autocast \"bfloat16\" (or absent)");
    c.probe = p->at("probe").get<std::string>();
  }
  return grad_scaler(pf, label, *p, c);
}

}  // namespace

Result<RecordingContract> parse_recording_contract(const json& doc, const std::string& label) {
  const JsonFields f(doc, label, "contract");
  if (!doc.is_object() || !doc.contains("format") || !doc.contains("format_version"))
    return invalid_argument("{}: no \"format\" and \"format_version\": not a recording of shardproof_torch", label)
        .with_hint("record the run with python/shardproof_torch's Recorder (docs/judge.md §1)");
  SP_ASSIGN_OR_RETURN(const std::string format, f.string("format"));
  if (format != kRecordingFormat)
    return invalid_argument("{}: format \"{}\" is not a recording of shardproof_torch (\"{}\")", label,
                            format.substr(0, 40), kRecordingFormat)
        .with_hint("record the run with python/shardproof_torch's Recorder (docs/judge.md §1)");
  auto version = f.integer("format_version", 1, kRecordingFormatVersion);
  if (!version.ok())
    return invalid_argument("{}", version.status().message())
        .with_hint(fmt::format("this shardproof reads recordings of format 1 and {}: judge it with the shardproof "
                               "the recorder came with",
                               kRecordingFormatVersion));
  RecordingContract c;
  c.format_version = static_cast<int>(*version);
  const bool v2 = c.every_step();
  if (Status s =
          v2 && doc.contains("trace") ? f.expect_keys({"format", "format_version", "torch", "python", "script", "model",
                                                       "world_size", "strategy", "batch", "steps", "checksum_every",
                                                       "optimizer", "loss", "precision", "trace", "hash"})
          : v2
              ? f.expect_keys({"format", "format_version", "torch", "python", "script", "model", "world_size",
                               "strategy", "batch", "steps", "checksum_every", "optimizer", "loss", "precision",
                               "hash"})
              : f.expect_keys({"format", "format_version", "torch", "python", "script", "model", "world_size",
                               "strategy", "batch", "steps", "checksum_every", "anchors", "optimizer", "loss", "hash"});
      !s.ok())
    return declared(s);
  c.doc = doc;
  // Every field before the hash: a value the judge cannot apply is named as such, not as an edit.
  if (Status s = strategy_and_batch(f, doc, label, c); !s.ok()) return declared(s);
  if (Status s = optimizer_and_loss(f, label, c); !s.ok()) return declared(s);
  if (v2)
    if (Status s = precision(f, label, c); !s.ok()) return declared(s);
  if (v2 && doc.contains("trace")) {  // absent: the recorder's own trace
    SP_ASSIGN_OR_RETURN(const std::string trace, f.string("trace"));
    if (trace != "recorder" && trace != "flight-recorder")
      return declared(
          f.error("trace", fmt::format("= \"{}\": \"recorder\" or \"flight-recorder\"", trace.substr(0, 40))));
    c.flight_recorder_trace = trace == "flight-recorder";
  }
  json body = doc;
  body.erase("hash");
  auto hash = f.sha256("hash");
  if (!hash.ok()) return declared(hash.status());
  if (sha256_hex(body.dump()) != *hash)
    return invalid_argument("{}: hash {} is not the SHA-256 of its other fields ({}): the contract was edited", label,
                            *hash, sha256_hex(body.dump()))
        .with_hint("a recording is judged as the Recorder wrote it: record the run again");
  auto model = config::hf_model_from_json(doc.at("model"), "recording", label + " model");
  if (!model.ok()) return model.status();
  c.model = std::move(model).value();
  if (c.seq_len > c.model.model.max_seq)
    return declared(f.error("batch", fmt::format("seq_len {} exceeds the model's max_position_embeddings {}", c.seq_len,
                                                 c.model.model.max_seq)));
  return c;
}

}  // namespace sp::judge

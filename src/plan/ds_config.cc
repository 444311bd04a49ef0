#include "plan/ds_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>

#include "core/file_io.h"
#include "core/json_io.h"

namespace sp::plan {
namespace {
using json = nlohmann::json;
using Kind = DsKeyOutcome::Kind;

// Why a key is accepted with no effect, or refused: one line each, also the rows of docs/deepspeed.md.
constexpr const char* kOffload =
    "offload to CPU or NVMe is not built: every tensor stays in its rank's memory, where the ledger measures it";
constexpr const char* kBuckets =
    "gradients are reduced per synchronization unit in the canonical order (parallel/grad_store.h); bucket sizes "
    "change only message sizes and timing, never values";
constexpr const char* kZero3Gathers =
    "ZeRO-3 gather scheduling and caching; shardproof gathers each unit's parameters when it runs it, with the same "
    "values";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string number_text(double x) { return fmt::format("{}", x); }

// One pass over a ds_config: typed readers that record every problem, and the outcome of every key.
class Mapper {
 public:
  explicit Mapper(json& config) : config_(config) {}

  std::vector<std::string> errors;
  std::vector<DsKeyOutcome> keys;

  void mapped(const std::string& key, std::string outcome) { keys.push_back({key, Kind::kMapped, std::move(outcome)}); }
  void no_effect(const std::string& key, std::string why) { keys.push_back({key, Kind::kNoEffect, std::move(why)}); }
  void refuse(const std::string& key, const std::string& why) { errors.push_back(fmt::format("{}: refused: {}", key, why)); }
  void wrong_type(const std::string& key, const json& v, const std::string& expected) {
    std::string msg = fmt::format("{} = {} must be {}", key, v.dump(), expected);
    if (v.is_string() && v.get<std::string>() == "auto")
      msg += " (\"auto\" is the Hugging Face Trainer's placeholder, filled in by transformers, not by DeepSpeed: "
             "write the value)";
    errors.push_back(msg);
  }

  // Sets `section.key = value` in the configuration; returns "section.key = value" for the outcome.
  std::string set(const std::string& section, const std::string& key, const json& value) {
    if (!config_.contains(section) || !config_[section].is_object()) config_[section] = json::object();
    config_[section][key] = value;
    return fmt::format("{}.{} = {}", section, key, value.is_number_float() ? number_text(value.get<double>()) : value.dump());
  }
  void erase(const std::string& section, const std::string& key) {
    if (config_.contains(section) && config_[section].is_object()) config_[section].erase(key);
  }
  const json& config() const { return config_; }
  json& config() { return config_; }

  // Typed readers: nullopt when absent or wrong (the latter recorded).
  std::optional<int64_t> integer(const json& obj, const std::string& where, const char* key, int64_t lo, int64_t hi) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    // DeepSpeed's pydantic models coerce 5e8 to 500000000; a whole-valued float is accepted likewise.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e15) {
      const auto x = static_cast<int64_t>(v.get<double>());
      if (x >= lo && x <= hi) return x;
    }
    if (!v.is_number_integer()) {
      wrong_type(path(where, key), v, fmt::format("an integer in [{}, {}]", lo, hi));
      return std::nullopt;
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      errors.push_back(fmt::format("{} = {} is out of range [{}, {}]", path(where, key), x, lo, hi));
      return std::nullopt;
    }
    return x;
  }
  std::optional<double> number(const json& obj, const std::string& where, const char* key, double lo, double hi) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_number()) {
      wrong_type(path(where, key), v, fmt::format("a number in [{}, {}]", lo, hi));
      return std::nullopt;
    }
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) {
      errors.push_back(fmt::format("{} = {} is out of range [{}, {}]", path(where, key), v.dump(), lo, hi));
      return std::nullopt;
    }
    return x;
  }
  std::optional<bool> boolean(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_boolean()) {
      wrong_type(path(where, key), v, "true or false");
      return std::nullopt;
    }
    return v.get<bool>();
  }
  std::optional<std::string> string(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_string()) {
      wrong_type(path(where, key), v, "a string");
      return std::nullopt;
    }
    return v.get<std::string>();
  }
  // The object at obj[key], or null (a wrong type recorded).
  const json* object(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return nullptr;
    const json& v = obj.at(key);
    if (!v.is_object()) {
      wrong_type(path(where, key), v, "an object {...}");
      return nullptr;
    }
    return &v;
  }
  // Every key of `obj` not in `known` is refused as unknown, naming the known keys.
  void unknown_keys(const json& obj, const std::string& where, const std::vector<std::string>& known) {
    for (const auto& [k, v] : obj.items()) {
      if (std::find(known.begin(), known.end(), k) != known.end()) continue;
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      errors.push_back(fmt::format("{}: unknown key (DeepSpeed's configuration refuses extra keys; known{}: {})",
                                   path(where, k.c_str()), where.empty() ? " top-level keys" : " in " + where, list));
    }
  }
  static std::string path(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : where + "." + key;
  }

 private:
  json& config_;
};

// DeepSpeed's train_batch_size = micro × accumulation × dp, with its inference of the missing one
// (DeepSpeedConfig._set_batch_related_parameters, then _batch_assertion): floor divisions, then the check.
void map_batch(Mapper& m, const json& ds, int dp, DsMapping& out) {
  constexpr int64_t kBig = int64_t{1} << 40;  // products of three stay far inside int64
  auto tb = m.integer(ds, "", "train_batch_size", -kBig, kBig);
  auto mb = m.integer(ds, "", "train_micro_batch_size_per_gpu", -kBig, kBig);
  auto ga = m.integer(ds, "", "gradient_accumulation_steps", -kBig, kBig);
  if ((ds.contains("train_batch_size") && !tb) || (ds.contains("train_micro_batch_size_per_gpu") && !mb) ||
      (ds.contains("gradient_accumulation_steps") && !ga))
    return;  // its type error is recorded
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
    inferred = fmt::format("gradient_accumulation_steps = 1 and train_micro_batch_size_per_gpu inferred as {} // {} = {}",
                           *tb, dp, *mb);
  } else if (mb) {
    ga = 1;
    tb = *mb * dp;
    inferred = fmt::format("gradient_accumulation_steps = 1 and train_batch_size inferred as {} × {} = {}", *mb, dp, *tb);
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
    if (*ga <= 0) m.errors.push_back(fmt::format("gradient_accumulation_steps = {} has to be greater than 0{}", *ga, why));
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
  const std::string ga_text =
      fmt::format("{} micro-batches per dp rank per step = train.global_batch / (train.micro_batch_size × dp {}) "
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

void map_zero(Mapper& m, const json& z) {
  const std::string w = "zero_optimization";
  if (auto stage = m.integer(z, w, "stage", 0, 3)) m.mapped(w + ".stage", m.set("parallel", "zero", *stage));
  const std::map<std::string, std::function<void(const std::string&)>> bools = {
      {"reduce_scatter",
       [&](const std::string& k) {
         if (auto b = m.boolean(z, w, "reduce_scatter"))
           *b ? m.mapped(k, "honoured: ZeRO reduce-scatters the gradients (no key)")
              : m.no_effect(k, "shardproof always reduce-scatters ZeRO gradients; DeepSpeed's all-reduce then keeps "
                               "the same shard values");
       }},
      {"allgather_partitions",
       [&](const std::string& k) {
         if (auto b = m.boolean(z, w, "allgather_partitions"))
           *b ? m.mapped(k, "honoured: ZeRO all-gathers the updated parameter shards after the step (no key)")
              : m.no_effect(k, "shardproof always all-gathers the updated shards; DeepSpeed's broadcasts deliver the "
                               "same values");
       }},
      {"overlap_comm",
       [&](const std::string& k) {
         if (m.boolean(z, w, "overlap_comm"))
           m.no_effect(k, "communication runs after each unit's backward, not overlapped with it: timing, not values");
       }},
      {"contiguous_gradients",
       [&](const std::string& k) {
         if (m.boolean(z, w, "contiguous_gradients"))
           m.no_effect(k, "a copy into one buffer against fragmentation; the ledger accounts shardproof's own buffers");
       }},
      {"round_robin_gradients",
       [&](const std::string& k) {
         if (m.boolean(z, w, "round_robin_gradients"))
           m.no_effect(k, "orders gradient copies for CPU offload, which is not built");
       }},
      {"elastic_checkpoint",
       [&](const std::string& k) {
         if (m.boolean(z, w, "elastic_checkpoint"))
           m.no_effect(k, "shardproof checkpoints always load at another topology (docs/checkpoints.md)");
       }},
      {"ignore_unused_parameters",
       [&](const std::string& k) {
         if (m.boolean(z, w, "ignore_unused_parameters"))
           m.no_effect(k, "every parameter of a LLaMA model receives a gradient");
       }},
      {"stage3_gather_16bit_weights_on_model_save",
       [&](const std::string& k) {
         if (m.boolean(z, w, "stage3_gather_16bit_weights_on_model_save"))
           m.no_effect(k, "`shardproof ckpt export` consolidates any checkpoint into HF-named weights");
       }},
      {"stage3_gather_fp16_weights_on_model_save",
       [&](const std::string& k) {
         if (m.boolean(z, w, "stage3_gather_fp16_weights_on_model_save"))
           m.no_effect(k, "`shardproof ckpt export` consolidates any checkpoint into HF-named weights");
       }},
      {"load_from_fp32_weights",
       [&](const std::string& k) {
         if (auto b = m.boolean(z, w, "load_from_fp32_weights"))
           *b ? m.mapped(k, "honoured: a resume restores the fp32 master weights (no key)")
              : m.refuse(k, "resuming from the 16-bit weights is not built: shardproof restores fp32 master weights");
       }},
  };
  const std::map<std::string, const char*> sizes = {
      {"reduce_bucket_size", kBuckets},
      {"allgather_bucket_size", kBuckets},
      {"stage3_prefetch_bucket_size", kZero3Gathers},
      {"stage3_param_persistence_threshold", kZero3Gathers},
      {"stage3_max_live_parameters", kZero3Gathers},
      {"stage3_max_reuse_distance", kZero3Gathers},
      {"sub_group_size", "tiles the optimizer step for offload; the update is element-wise, so values are the same"},
  };
  std::vector<std::string> known = {"stage"};
  for (const auto& [k, f] : bools) {
    known.push_back(k);
    if (z.contains(k)) f(w + "." + k);
  }
  for (const auto& [k, why] : sizes) {
    known.push_back(k);
    if (m.integer(z, w, k.c_str(), 0, INT64_MAX)) m.no_effect(w + "." + k, why);
  }
  // Offload and ZeRO++ compression: refused unless switched off.
  for (const char* k : {"offload_param", "offload_optimizer"}) {
    known.push_back(k);
    if (const json* o = m.object(z, w, k)) {
      const std::string device = o->contains("device") && o->at("device").is_string() ? o->at("device").get<std::string>() : "";
      if (device == "none")
        m.no_effect(w + "." + k, "device \"none\": nothing is offloaded");
      else
        m.refuse(w + "." + k, kOffload);
    }
  }
  for (const char* k : {"cpu_offload", "cpu_offload_params", "cpu_offload_use_pin_memory"}) {
    known.push_back(k);
    if (auto b = m.boolean(z, w, k)) *b ? m.refuse(w + "." + k, kOffload) : m.no_effect(w + "." + k, "false: nothing is offloaded");
  }
  for (const char* k : {"zero_quantized_weights", "zero_quantized_gradients"}) {
    known.push_back(k);
    if (auto b = m.boolean(z, w, k))
      *b ? m.refuse(w + "." + k, "ZeRO++ quantized communication is compression, which changes the values; not built")
         : m.no_effect(w + "." + k, "false: no quantization");
  }
  known.push_back("zero_hpz_partition_size");
  if (auto n = m.integer(z, w, "zero_hpz_partition_size", 1, 1 << 20))
    *n > 1 ? m.refuse(w + ".zero_hpz_partition_size", "ZeRO++ hierarchical partitioning is not built")
           : m.no_effect(w + ".zero_hpz_partition_size", "1: no secondary partition");
  m.unknown_keys(z, w, known);
}

void map_precision(Mapper& m, const json& ds) {
  const json* bf = m.object(ds, "", "bf16");
  const std::string bf_key = bf ? "bf16" : "bfloat16";  // DeepSpeed's legacy spelling
  if (!bf) bf = m.object(ds, "", "bfloat16");
  const json* fp = m.object(ds, "", "fp16");
  bool bf_on = false, fp_on = false;
  if (bf) {
    if (auto b = m.boolean(*bf, bf_key, "enabled")) bf_on = *b;
    m.unknown_keys(*bf, bf_key, {"enabled"});
  }
  if (fp) {
    if (auto b = m.boolean(*fp, "fp16", "enabled")) fp_on = *b;
    m.unknown_keys(*fp, "fp16",
                   {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                    "consecutive_hysteresis", "min_loss_scale", "auto_cast", "fp16_master_weights_and_grads"});
  }
  if (bf_on && fp_on) {
    m.errors.push_back(fmt::format("{}.enabled and fp16.enabled are both true; DeepSpeed refuses this (\"bfloat16 and "
                                   "fp16 modes cannot be simultaneously enabled\")",
                                   bf_key));
    return;
  }
  if (bf_on) {
    m.config().erase("fp16");
    m.mapped(bf_key + ".enabled", m.set("train", "precision", "bf16") +
                                      " (fp32 master weights and AdamW moments; gradients in train.grad_dtype)");
  } else if (fp_on) {
    const std::string w = "fp16";
    json table = json::object();
    std::vector<std::string> lines;
    if (auto ls = m.number(*fp, w, "loss_scale", 0.0, 1e30)) {
      if (*ls != 0.0)
        m.refuse("fp16.loss_scale", fmt::format("a static loss scale ({}) is not built: use 0 (dynamic)", *ls));
      else
        m.mapped("fp16.loss_scale", "0: dynamic loss scaling (the [fp16] table)");
    }
    table["initial_scale_power"] = m.integer(*fp, w, "initial_scale_power", 0, 64).value_or(16);
    table["loss_scale_window"] = m.integer(*fp, w, "loss_scale_window", 1, INT64_C(1) << 40).value_or(1000);
    table["hysteresis"] = m.integer(*fp, w, "hysteresis", 1, 1 << 20).value_or(2);
    table["consecutive_hysteresis"] = m.boolean(*fp, w, "consecutive_hysteresis").value_or(false);
    table["min_loss_scale"] = m.number(*fp, w, "min_loss_scale", 0.0, 1e300).value_or(1.0);
    for (const char* k : {"initial_scale_power", "loss_scale_window", "hysteresis", "consecutive_hysteresis", "min_loss_scale"})
      m.mapped(std::string("fp16.") + k, (fp->contains(k) ? "" : "(absent, DeepSpeed's default) ") +
                                             fmt::format("fp16.{} = {}", k, table[k].dump()));
    if (auto b = m.boolean(*fp, w, "auto_cast"))
      *b ? m.refuse("fp16.auto_cast", "casting the model's inputs to fp16 is not built (the engine's casts are fixed, "
                                      "docs/kernels.md)")
         : m.no_effect("fp16.auto_cast", "false: inputs are not cast");
    if (auto b = m.boolean(*fp, w, "fp16_master_weights_and_grads"))
      *b ? m.refuse("fp16.fp16_master_weights_and_grads", "fp16 master weights are not built: masters are fp32")
         : m.no_effect("fp16.fp16_master_weights_and_grads", "false: fp32 master weights");
    m.config()["fp16"] = table;
    m.mapped("fp16.enabled", m.set("train", "precision", "fp16"));
  } else {
    m.config().erase("fp16");
    m.erase("train", "gemm16");
    const std::string what = m.set("train", "precision", "fp32") + ", " + m.set("train", "grad_dtype", "fp32");
    if (bf) m.mapped(bf_key + ".enabled", "false: " + what);
    if (fp) m.mapped("fp16.enabled", "false: " + what);
    if (!bf && !fp) m.mapped("bf16/fp16", "(both absent: DeepSpeed trains in fp32) " + what);
    if (fp)
      for (const auto& [k, v] : fp->items())
        if (k != "enabled") m.no_effect("fp16." + k, "fp16.enabled is false");
  }
}

// Returns the scheduler's type when it is one of the three (so the optimizer can say whose lr wins).
std::string scheduler_type(const json& ds) {
  if (!ds.contains("scheduler") || !ds.at("scheduler").is_object()) return "";
  const json& s = ds.at("scheduler");
  return s.contains("type") && s.at("type").is_string() ? s.at("type").get<std::string>() : "";
}

void map_optimizer(Mapper& m, const json& o, const std::string& sched) {
  const std::string w = "optimizer";
  m.unknown_keys(o, w, {"type", "params"});
  const auto type = m.string(o, w, "type");
  if (!type) {
    if (!o.contains("type")) m.errors.push_back("optimizer.type: missing (\"AdamW\" or \"Adam\")");
    return;
  }
  const std::string t = lower(*type);
  if (t != "adam" && t != "adamw") {
    m.refuse("optimizer.type", fmt::format("\"{}\" is not built: shardproof's optimizer is AdamW (DeepSpeed's "
                                           "\"AdamW\", or \"Adam\" in its default adam_w_mode)",
                                           *type));
    return;
  }
  const json empty = json::object();
  const json* p = o.contains("params") ? m.object(o, w, "params") : &empty;
  if (!p) return;
  const std::string pw = "optimizer.params";
  m.unknown_keys(*p, pw, {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "bias_correction", "amsgrad"});
  const bool torch_adam = m.boolean(*p, pw, "torch_adam").value_or(false);
  // DeepSpeed: "Adam" runs AdamW's decoupled decay unless adam_w_mode is false; "AdamW" always does.
  const bool adam_w_mode = m.boolean(*p, pw, "adam_w_mode").value_or(true);
  const bool decoupled = t == "adamw" || adam_w_mode;
  // Defaults of the optimizer DeepSpeed builds: FusedAdam (lr 1e-3, betas (0.9, 0.999), eps 1e-8,
  // weight_decay 0), or with torch_adam torch.optim.AdamW (weight_decay 1e-2) / Adam (0).
  const double wd_default = torch_adam && t == "adamw" ? 1e-2 : 0.0;
  const auto lr = m.number(*p, pw, "lr", 0.0, 10.0);
  const auto eps = m.number(*p, pw, "eps", 1e-30, 1.0);
  const auto wd = m.number(*p, pw, "weight_decay", 0.0, 10.0);
  double beta1 = 0.9, beta2 = 0.999;
  bool betas_ok = true;
  if (p->contains("betas")) {
    const json& b = p->at("betas");
    betas_ok = b.is_array() && b.size() == 2 && b[0].is_number() && b[1].is_number() && b[0].get<double>() >= 0 &&
               b[0].get<double>() < 1 && b[1].get<double>() >= 0 && b[1].get<double>() < 1;
    if (!betas_ok)
      m.wrong_type("optimizer.params.betas", b, "[beta1, beta2], two numbers in [0, 1)");
    else
      beta1 = b[0].get<double>(), beta2 = b[1].get<double>();
  }
  const std::string tag = fmt::format("(absent, {}'s default) ", torch_adam ? "torch.optim" : "FusedAdam");
  m.mapped("optimizer.type", fmt::format("\"{}\": AdamW with {} weight decay{}", *type,
                                         decoupled ? "decoupled (AdamW's)" : "L2 (Adam's original)",
                                         t == "adam" && decoupled ? " (DeepSpeed's adam_w_mode defaults to true)" : ""));
  const bool sched_sets_lr = sched == "WarmupLR" || sched == "WarmupDecayLR";
  if (sched_sets_lr && lr)
    m.no_effect("optimizer.params.lr", fmt::format("scheduler {} sets every step's lr from warmup_min_lr and "
                                                   "warmup_max_lr, overriding the optimizer's",
                                                   sched));
  else if (!sched_sets_lr)
    m.mapped("optimizer.params.lr", (lr ? "" : tag) + m.set("train", "lr", lr.value_or(1e-3)));
  if (betas_ok) {
    const std::string s = m.set("train", "beta1", beta1) + ", " + m.set("train", "beta2", beta2);
    m.mapped("optimizer.params.betas", (p->contains("betas") ? "" : tag) + s);
  }
  m.mapped("optimizer.params.eps", (eps ? "" : tag) + m.set("train", "eps", eps.value_or(1e-8)));
  const double decay = wd.value_or(wd_default);
  if (!decoupled && decay > 0)
    m.refuse("optimizer.params.adam_w_mode",
             fmt::format("Adam with adam_w_mode = false adds weight_decay · θ = {} · θ to the gradient (L2, Adam's "
                         "original form; DeepSpeed's FusedAdam adam_w_mode=False), which shardproof's AdamW does not "
                         "compute; use \"AdamW\", adam_w_mode = true, or weight_decay = 0",
                         decay));
  m.mapped("optimizer.params.weight_decay",
           (wd ? "" : tag) + m.set("train", "weight_decay", decay) + " (on matrices; norm weights are not decayed)");
  if (p->contains("adam_w_mode") && (decoupled || decay == 0))
    m.no_effect("optimizer.params.adam_w_mode", decay == 0 && !decoupled
                                                    ? "weight_decay is 0, so L2 and decoupled decay are the same update"
                                                    : "decoupled weight decay: shardproof's AdamW");
  if (p->contains("torch_adam")) m.no_effect("optimizer.params.torch_adam", "selects DeepSpeed's kernel, not the math");
  if (auto b = m.boolean(*p, pw, "bias_correction"))
    *b ? m.mapped("optimizer.params.bias_correction", "honoured: AdamW corrects both moments' bias (no key)")
       : m.refuse("optimizer.params.bias_correction", "AdamW without bias correction is not built");
  if (auto b = m.boolean(*p, pw, "amsgrad"))
    *b ? m.refuse("optimizer.params.amsgrad", "AMSGrad is not built")
       : m.no_effect("optimizer.params.amsgrad", "false: plain AdamW");
}

void map_scheduler(Mapper& m, const json& s) {
  const std::string w = "scheduler";
  m.unknown_keys(s, w, {"type", "params"});
  const auto type = m.string(s, w, "type");
  if (!type) {
    if (!s.contains("type")) m.errors.push_back("scheduler.type: missing (WarmupLR, WarmupDecayLR or WarmupCosineLR)");
    return;
  }
  const std::map<std::string, std::string> kinds = {
      {"WarmupLR", "warmup_lr"}, {"WarmupDecayLR", "warmup_decay_lr"}, {"WarmupCosineLR", "warmup_cosine_lr"}};
  const auto kind = kinds.find(*type);
  if (kind == kinds.end()) {
    m.refuse("scheduler.type", fmt::format("\"{}\" is not built: use WarmupLR, WarmupDecayLR or WarmupCosineLR", *type));
    return;
  }
  const json empty = json::object();
  const json* p = s.contains("params") ? m.object(s, w, "params") : &empty;
  if (!p) return;
  const std::string pw = "scheduler.params";
  const bool cosine = *type == "WarmupCosineLR", decay = *type == "WarmupDecayLR";
  std::vector<std::string> known = {"warmup_num_steps", "warmup_type", "last_batch_iteration"};
  if (cosine)
    known.insert(known.end(), {"total_num_steps", "warmup_min_ratio", "cos_min_ratio"});
  else
    known.insert(known.end(), {"warmup_min_lr", "warmup_max_lr"});
  if (decay) known.push_back("total_num_steps");
  m.unknown_keys(*p, pw, known);
  m.mapped("scheduler.type", m.set("train", "lr_schedule", kind->second));
  const std::string tag = "(absent, DeepSpeed's default) ";
  const auto warmup = m.integer(*p, pw, "warmup_num_steps", 0, INT64_C(1) << 40);
  m.mapped("scheduler.params.warmup_num_steps",
           (warmup ? "" : tag) + m.set("train", "warmup_steps", warmup.value_or(1000)) + " (used as max(2, n))");
  if (const auto wt = m.string(*p, pw, "warmup_type"); wt && *wt != "log" && *wt != "linear")
    m.errors.push_back(fmt::format("scheduler.params.warmup_type = \"{}\" must be \"log\" or \"linear\" (DeepSpeed "
                                   "would warn and use \"log\")",
                                   *wt));
  else
    m.mapped("scheduler.params.warmup_type", (wt ? "" : tag) + m.set("train", "warmup_type", wt.value_or("log")));
  if (const auto last = m.integer(*p, pw, "last_batch_iteration", INT64_MIN, INT64_MAX)) {
    if (*last != -1)
      m.refuse("scheduler.params.last_batch_iteration",
               fmt::format("{}: starting a schedule mid-way is a resume, which shardproof takes from its own "
                           "checkpoint (--resume)",
                           *last));
    else
      m.no_effect("scheduler.params.last_batch_iteration", "-1: the schedule starts at step 0");
  }
  if (cosine || decay) {
    if (const auto total = m.integer(*p, pw, "total_num_steps", 1, INT64_C(1) << 40))
      m.mapped("scheduler.params.total_num_steps", m.set("train", "schedule_steps", *total));
    else if (!p->contains("total_num_steps"))
      m.errors.push_back(fmt::format("scheduler.params.total_num_steps: missing; {} requires it", *type));
  } else {
    m.set("train", "schedule_steps", 0);
  }
  if (cosine) {
    const auto r_w = m.number(*p, pw, "warmup_min_ratio", 0.0, 1.0);
    const auto r_c = m.number(*p, pw, "cos_min_ratio", 0.0, 1.0);
    m.mapped("scheduler.params.warmup_min_ratio", (r_w ? "" : tag) + m.set("train", "warmup_min_ratio", r_w.value_or(0.0)));
    m.mapped("scheduler.params.cos_min_ratio", (r_c ? "" : tag) + m.set("train", "cos_min_ratio", r_c.value_or(1e-4)));
  } else {
    const auto lo = m.number(*p, pw, "warmup_min_lr", 0.0, 10.0);
    const auto hi = m.number(*p, pw, "warmup_max_lr", 0.0, 10.0);
    m.mapped("scheduler.params.warmup_min_lr", (lo ? "" : tag) + m.set("train", "warmup_min_lr", lo.value_or(0.0)));
    m.mapped("scheduler.params.warmup_max_lr", (hi ? "" : tag) + m.set("train", "lr", hi.value_or(1e-3)));
  }
}

void map_activation_checkpointing(Mapper& m, const json& a) {
  const std::string w = "activation_checkpointing";
  m.mapped(w, m.set("train", "recompute", "full") +
                  ": each block keeps only its input and is recomputed in backward, what the model's "
                  "deepspeed.checkpointing.checkpoint call per layer does");
  const std::map<std::string, const char*> no_effect = {
      {"partition_activations", "splits the kept inputs across tensor-parallel ranks: memory, not values"},
      {"contiguous_memory_optimization", "a buffer layout against fragmentation: memory, not values"},
      {"synchronize_checkpoint_boundary", "a device synchronize around each checkpoint: timing, not values"},
      {"profile", "timing of the checkpoint calls: metrics.jsonl and timeline/ record the step's split"},
  };
  std::vector<std::string> known = {"cpu_checkpointing", "number_checkpoints"};
  for (const auto& [k, why] : no_effect) {
    known.push_back(k);
    if (m.boolean(a, w, k.c_str())) m.no_effect(w + "." + k, why);
  }
  if (a.contains("number_checkpoints")) {
    if (a.at("number_checkpoints").is_null() || m.integer(a, w, "number_checkpoints", 0, INT64_C(1) << 30))
      m.no_effect(w + ".number_checkpoints", "sizes the contiguous buffer: memory, not values");
  }
  if (auto b = m.boolean(a, w, "cpu_checkpointing"))
    *b ? m.refuse(w + ".cpu_checkpointing", kOffload) : m.no_effect(w + ".cpu_checkpointing", "false: kept in memory");
  m.unknown_keys(a, w, known);
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
    return invalid_argument("{}", j.status().message()).with_hint("a ds_config.json is one JSON object (docs/deepspeed.md)");
  if (!j->is_object())
    return invalid_argument("--deepspeed '{}': the top level must be a JSON object {{...}}, got {}", path, j->type_name());
  return j;
}

Result<DsMapping> apply_ds_config(const json& ds, int dp, json& config) {
  if (!ds.is_object()) return invalid_argument("ds_config: the top level must be a JSON object");
  if (dp < 1) return invalid_argument("ds_config: data-parallel size {} must be ≥ 1", dp);
  json work = config;
  Mapper m(work);
  DsMapping out;
  m.unknown_keys(ds, "",
                 {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization",
                  "bf16", "bfloat16", "fp16", "gradient_clipping", "optimizer", "scheduler", "activation_checkpointing",
                  "steps_per_print", "wall_clock_breakdown", "zero_allow_untested_optimizer", "moe", "compression_training",
                  "aio"});
  // Refused by name, with the reason.
  if (ds.contains("moe")) m.refuse("moe", "Mixture-of-Experts layers are not built: shardproof trains dense LLaMA models");
  if (ds.contains("compression_training"))
    m.refuse("compression_training", "compression (quantization-aware training, pruning, layer reduction) changes the "
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
    m.no_effect("steps_per_print", "shardproof prints a progress line per step and writes every step's loss and lr to "
                                   "metrics.jsonl");
  if (m.boolean(ds, "", "wall_clock_breakdown"))
    m.no_effect("wall_clock_breakdown",
                "the step's compute / communication / idle split is always recorded (metrics.jsonl, timeline/)");
  if (m.boolean(ds, "", "zero_allow_untested_optimizer"))
    m.no_effect("zero_allow_untested_optimizer", "the optimizer is shardproof's own AdamW, tested with every ZeRO stage");
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

}  // namespace sp::plan

// The ds_config sections other than the batch keys: zero_optimization, bf16/fp16, optimizer, scheduler,
// activation_checkpointing (docs/deepspeed.md §"Every key"). Each key is mapped, accepted with no effect
// (with why), or refused by name (with why); unknown keys are refused naming the known ones.
// Reference: https://www.deepspeed.ai/docs/config-json/, deepspeed/runtime/zero/config.py, lr_schedules.py.
#include <fmt/format.h>

#include <functional>
#include <map>

#include "config/ds_mapper.h"

namespace sp::config::ds_detail {

namespace {

// zero_optimization's switches: each honoured (its "true" is what shardproof does), or with no effect on values.
void map_zero_switches(Mapper& m, const json& z, const std::string& w, std::vector<std::string>& known) {
  const std::map<std::string, std::function<void(const std::string&)>> bools = {
      {"reduce_scatter",
       [&](const std::string& k) {
         if (auto b = m.boolean(z, w, "reduce_scatter"))
           *b ? m.mapped(k, "honoured: ZeRO reduce-scatters the gradients (no key)")
              : m.no_effect(k,
                            "shardproof always reduce-scatters ZeRO gradients; DeepSpeed's all-reduce then keeps "
                            "the same shard values");
       }},
      {"allgather_partitions",
       [&](const std::string& k) {
         if (auto b = m.boolean(z, w, "allgather_partitions"))
           *b ? m.mapped(k, "honoured: ZeRO all-gathers the updated parameter shards after the step (no key)")
              : m.no_effect(k,
                            "shardproof always all-gathers the updated shards; DeepSpeed's broadcasts deliver the "
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
  for (const auto& [k, f] : bools) {
    known.push_back(k);
    if (z.contains(k)) f(w + "." + k);
  }
  for (const auto& [k, why] : sizes) {
    known.push_back(k);
    if (m.integer(z, w, k.c_str(), 0, INT64_MAX)) m.no_effect(w + "." + k, why);
  }
}

// Offload and ZeRO++ compression: refused unless switched off.
void map_zero_offload(Mapper& m, const json& z, const std::string& w, std::vector<std::string>& known) {
  for (const char* k : {"offload_param", "offload_optimizer"}) {
    known.push_back(k);
    if (const json* o = m.object(z, w, k)) {
      const std::string device =
          o->contains("device") && o->at("device").is_string() ? o->at("device").get<std::string>() : "";
      if (device == "none")
        m.no_effect(w + "." + k, "device \"none\": nothing is offloaded");
      else
        m.refuse(w + "." + k, kOffload);
    }
  }
  for (const char* k : {"cpu_offload", "cpu_offload_params", "cpu_offload_use_pin_memory"}) {
    known.push_back(k);
    if (auto b = m.boolean(z, w, k))
      *b ? m.refuse(w + "." + k, kOffload) : m.no_effect(w + "." + k, "false: nothing is offloaded");
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
}

}  // namespace

void map_zero(Mapper& m, const json& z) {
  const std::string w = "zero_optimization";
  if (auto stage = m.integer(z, w, "stage", 0, 3)) m.mapped(w + ".stage", m.set("parallel", "zero", *stage));
  std::vector<std::string> known = {"stage"};
  map_zero_switches(m, z, w, known);
  map_zero_offload(m, z, w, known);
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
    m.errors.push_back(
        fmt::format("{}.enabled and fp16.enabled are both true; DeepSpeed refuses this (\"bfloat16 and "
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
    for (const char* k :
         {"initial_scale_power", "loss_scale_window", "hysteresis", "consecutive_hysteresis", "min_loss_scale"})
      m.mapped(std::string("fp16.") + k, (fp->contains(k) ? "" : "(absent, DeepSpeed's default) ") +
                                             fmt::format("fp16.{} = {}", k, table[k].dump()));
    if (auto b = m.boolean(*fp, w, "auto_cast"))
      *b ? m.refuse("fp16.auto_cast",
                    "casting the model's inputs to fp16 is not built (the engine's casts are fixed, "
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
  if (p->contains("max_grad_norm"))  // DeepSpeed refuses it too, pointing at gradient_clipping
    m.refuse("optimizer.params.max_grad_norm",
             "clipping is the top-level \"gradient_clipping\" key in a ds_config "
             "(DeepSpeed: \"please switch to using the deepspeed parameter "
             "'gradient_clipping'\")");
  m.unknown_keys(*p, pw,
                 {"lr", "betas", "eps", "weight_decay", "adam_w_mode", "torch_adam", "bias_correction", "amsgrad",
                  "max_grad_norm"});
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
  m.mapped("optimizer.type",
           fmt::format("\"{}\": AdamW with {} weight decay{}", *type,
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
    m.refuse("scheduler.type",
             fmt::format("\"{}\" is not built: use WarmupLR, WarmupDecayLR or WarmupCosineLR", *type));
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
    m.errors.push_back(
        fmt::format("scheduler.params.warmup_type = \"{}\" must be \"log\" or \"linear\" (DeepSpeed "
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
    m.mapped("scheduler.params.warmup_min_ratio",
             (r_w ? "" : tag) + m.set("train", "warmup_min_ratio", r_w.value_or(0.0)));
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

}  // namespace sp::config::ds_detail

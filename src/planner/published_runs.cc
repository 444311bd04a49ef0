#include "planner/published_runs.h"

#include <fmt/format.h>

#include <cmath>

#include "config/toml_fields.h"
#include "planner/model_shape.h"

namespace sp::planner {

Result<PublishedTable> read_published_table(const std::string& path) {
  SP_ASSIGN_OR_RETURN(toml::table root, config::parse_toml_file(path));
  std::vector<std::string> errs;
  PublishedTable t;
  config::TomlFields top(&root, "", path, &errs);
  config::TomlFields src(top.table("source"), "source", path, &errs);
  t.title = src.string("title").value_or("");
  t.authors = src.string("authors").value_or("");
  t.venue = src.string("venue").value_or("");
  t.url = src.string("url").value_or("");
  t.table = src.string("table").value_or("");
  t.cluster = src.string("cluster").value_or("");
  t.precision = src.string("precision").value_or("");
  t.recompute = src.choice("recompute", {"none", "selective", "full"}).value_or("none");
  t.flops_definition = src.string("flops_definition").value_or("");
  t.schedule = src.choice("schedule", {"1f1b", "interleaved"}, /*required=*/false).value_or("");
  t.activations = src.choice("activations", {"fp32", "bf16", "fp16"}, /*required=*/false).value_or("");
  t.seq_len = src.integer("seq_len", 1, int64_t{1} << 24).value_or(1);
  t.vocab_size = src.integer("vocab_size", 1, int64_t{1} << 31).value_or(1);
  t.peak_tflops = src.number("peak_tflops", config::NumberRule::kPositive).value_or(1);
  src.finish();
  const auto rows = top.tables("run");
  for (size_t i = 0; i < rows.size(); ++i) {
    config::TomlFields f(rows[i], fmt::format("run[{}]", i), path, &errs);
    PublishedRun r;
    r.model = f.string("model").value_or("");
    r.params_billion = f.number("params_billion", config::NumberRule::kPositive).value_or(0);
    r.attention_heads = f.integer("attention_heads", 1, 1 << 20).value_or(1);
    r.hidden_size = f.integer("hidden_size", 1, int64_t{1} << 30).value_or(1);
    r.layers = f.integer("layers", 1, 1 << 20).value_or(1);
    r.tp = static_cast<int>(f.integer("tp", 1, 1 << 20).value_or(1));
    r.pp = static_cast<int>(f.integer("pp", 1, 1 << 20).value_or(1));
    r.gpus = static_cast<int>(f.integer("gpus", 1, 1 << 24).value_or(1));
    r.global_batch = f.integer("global_batch", 1, int64_t{1} << 40).value_or(1);
    r.tflops_per_gpu = f.number("tflops_per_gpu", config::NumberRule::kPositive).value_or(0);
    r.percent_of_peak = f.number("percent_of_peak", config::NumberRule::kPositive).value_or(0);
    r.aggregate_pflops = f.number("aggregate_pflops", config::NumberRule::kPositive).value_or(0);
    f.finish();
    const std::string at = fmt::format("{}: run[{}] ({})", path, i, r.model);
    if (r.gpus % (r.tp * r.pp) != 0)
      errs.push_back(fmt::format("{}: gpus {} is not divisible by tp × pp = {} × {}", at, r.gpus, r.tp, r.pp));
    auto shape = named_shape(r.model);
    if (!shape.ok()) {
      errs.push_back(fmt::format("{}: {}", at, shape.status().message()));
    } else {
      if (shape->n_heads != r.attention_heads || shape->dim != r.hidden_size || shape->n_layers != r.layers)
        errs.push_back(fmt::format("{}: heads/hidden/layers {}/{}/{} differ from the named shape's {}/{}/{}", at,
                                   r.attention_heads, r.hidden_size, r.layers, shape->n_heads, shape->dim,
                                   shape->n_layers));
      const double ours = static_cast<double>(shape->param_count()) / 1e9;
      if (std::abs(ours - r.params_billion) > 0.05 + 1e-9)
        errs.push_back(fmt::format("{}: params_billion {} but the shape has {:.3f} billion parameters", at,
                                   r.params_billion, ours));
    }
    const double aggregate = r.tflops_per_gpu * r.gpus / 1000.0;
    if (r.aggregate_pflops > 0 && std::abs(aggregate - r.aggregate_pflops) > 0.005 * r.aggregate_pflops + 0.05)
      errs.push_back(
          fmt::format("{}: tflops_per_gpu × gpus = {} × {} = {:.1f} PFLOP/s disagrees with aggregate_pflops {}", at,
                      r.tflops_per_gpu, r.gpus, aggregate, r.aggregate_pflops));
    const double percent = 100.0 * r.tflops_per_gpu / t.peak_tflops;
    if (std::abs(percent - r.percent_of_peak) > 0.5 + 50.0 / t.peak_tflops)
      errs.push_back(fmt::format("{}: tflops_per_gpu / peak = {} / {} = {:.1f} % disagrees with percent_of_peak {}", at,
                                 r.tflops_per_gpu, t.peak_tflops, percent, r.percent_of_peak));
    t.runs.push_back(r);
  }
  top.finish();
  SP_RETURN_IF_ERROR(config::fields_status(fmt::format("invalid published table {}", path), errs,
                                           "data/published/ files follow docs/plan.md §published"));
  return t;
}

}  // namespace sp::planner

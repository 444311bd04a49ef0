// `shardproof grads`: the loss and every gradient of one token batch for given weights, written as
// safetensors with Hugging Face names and (out, in) layout — the interface the PyTorch oracle tests
// use. Runs the same engine path as training at dp = tp = pp = 1 with one micro-batch.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <memory>

#include "ckpt/hf_weights.h"
#include "ckpt/safetensors.h"
#include "cli/command.h"
#include "cli/run_setup.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/log.h"
#include "core/revision.h"
#include "data/token_batch.h"
#include "parallel/engine.h"
#include "parallel/memory_fit.h"

namespace sp::cli {
namespace {

Result<model::LlamaConfig> read_model_config(const std::string& path) {
  nlohmann::json j;
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json") {
    SP_ASSIGN_OR_RETURN(std::string text, read_file(path, 1 << 24));
    auto parsed = parse_json_strict(text, "model config '" + path + "'");
    if (!parsed.ok()) return invalid_argument("{}", parsed.status().message());
    j = std::move(parsed).value();
  } else {
    SP_ASSIGN_OR_RETURN(j, config::read_toml(path));
  }
  if (j.is_object() && j.contains("model")) j = j.at("model");
  auto c = model::LlamaConfig::from_json(j);
  if (!c.ok()) return c.status().with_context(path);
  return c;
}

Status run_grads(const std::string& config_path, const std::string& weights, const std::string& tokens_path,
                 const std::string& out) {
  SP_RETURN_IF_ERROR(check_input_file("--config", config_path));
  SP_RETURN_IF_ERROR(check_input_file("--tokens", tokens_path));
  SP_ASSIGN_OR_RETURN(model::LlamaConfig mc, read_model_config(config_path));
  SP_ASSIGN_OR_RETURN(data::TokenBatch batch, data::read_token_batch(tokens_path, mc.vocab_size));
  if (batch.cols - 1 > mc.max_seq)
    return invalid_argument("token batch '{}' has sequences of {} tokens; model.max_seq is {}", tokens_path,
                            batch.cols - 1, mc.max_seq);
  // The loss is the mean over target tokens (columns 1.., not −1): a batch without one has no loss.
  if (data::token_batch_targets(batch) == 0)
    return invalid_argument(
               "token batch '{}' has no target token: every token after the first of each row is −1 "
               "(padding), so the loss would be a mean over nothing",
               tokens_path)
        .with_hint("give at least one row a real token id after its first position");
  config::RunConfig rc;
  rc.model = mc;
  rc.data.vocab_size = mc.vocab_size;
  rc.train.micro_batch_size = batch.rows;
  rc.train.global_batch = batch.rows;
  rc.train.seq_len = batch.cols - 1;
  rc.train.eval_batches = 0;
  SP_ASSIGN_OR_RETURN(plan::RunPlan plan, plan::RunPlan::make(rc, 1));
  SP_ASSIGN_OR_RETURN(comm::ProcessGrid grid, comm::ProcessGrid::create(1, 1, 1, "tp-dp-pp", 1));
  comm::GridCommunicators comms = comm::make_grid_communicators(grid);
  // Refused before the weights or the engine are allocated, as train does (parallel/memory_fit.h).
  SP_RETURN_IF_ERROR(parallel::check_memory_fit(plan, grid, *comms.world));
  // The same reader as train --init-from: exactly the model's tensors, exact shapes, finite values.
  SP_ASSIGN_OR_RETURN(const ckpt::NamedTensors w, ckpt::read_hf_weights(weights, mc));
  comm::TraceContext trace;
  MemoryLedger ledger;
  ckpt::SafetensorsWriter writer;
  std::map<std::string, std::vector<float>> grads;
  double loss = 0.0;
  {
    parallel::Engine engine(plan, grid, comms, trace, ledger, nullptr, nullptr, nullptr);
    engine.set_parameters([&](const std::string& name) -> const float* {
      auto it = w.find(name);
      return it == w.end() ? nullptr : it->second.data();
    });
    loss = engine.compute_gradients(batch.tokens.data());
    for (const model::UnitPiece& p : engine.gradient_pieces())
      for (const model::TensorSlot& t : p.unit->tensors) {
        auto& g = grads[t.spec.name];
        g.resize(static_cast<size_t>(t.numel));
        convert(f32_view(g.data(), t.numel), p.view().slice(t.offset, t.numel));  // 16-bit gradients: widened
      }
  }
  for (const model::WeightSpec& s : model::weight_table(mc))
    writer.add(s.name, DType::kF32, s.shape, grads.at(s.name).data());
  writer.set_metadata("format", "shardproof-grads");
  if (!std::isfinite(loss))
    return failed_precondition("the loss of token batch '{}' under weights '{}' is {}: no gradients written",
                               tokens_path, weights, loss)
        .with_hint("the weights are finite but too large for float32 arithmetic; check how they were made");
  writer.set_metadata("loss", fmt::format("{:.17g}", loss));
  writer.set_metadata("engine", git_revision());
  SP_RETURN_IF_ERROR(writer.write(out));
  log_info("loss {:.9f}; {} gradients written to {}", loss, grads.size(), out);
  return Status();
}

}  // namespace

void register_grads(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string config, weights, tokens, out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("grads", "Loss and every gradient of one token batch for given weights");
  cmd->add_option("--config", o->config, "Model configuration (JSON or TOML, keys of [model])")->required();
  cmd->add_option("--weights", o->weights,
                  "Weights with Hugging Face names: a safetensors file, an index or a directory (as train --init-from)")
      ->required();
  cmd->add_option("--tokens", o->tokens, "Token batch file (docs/formats/token_batch.md)")->required();
  cmd->add_option("--out", o->out, "Output safetensors: gradients, loss in the metadata")->required();
  cmd->callback([o, &result] {
    comm::MpiScope mpi(nullptr, nullptr);
    if (mpi.world_size() != 1) {
      result.exit_code = report_status(invalid_argument("shardproof grads runs on one rank, got {}", mpi.world_size()));
      return;
    }
    result.exit_code = report_status(run_grads(o->config, o->weights, o->tokens, o->out));
  });
}

}  // namespace sp::cli

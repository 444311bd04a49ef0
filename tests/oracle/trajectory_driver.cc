// Test-only driver for the PyTorch trajectory oracle (test_oracle.py): trains the single-device
// engine (the same Engine code path as `shardproof train` at dp = tp = pp = 1) from given weights on
// given token batches, and writes the per-step losses, gradient norms, loss scales and skips plus the final
// weights (in mixed precision the fp32 master weights).
//   trajectory_driver JOB.json     with JOB = {"model": {...}, "train": {...}, ["fp16": {...},] "weights":
//   W.safetensors,
//                                              "batches": B.bin, "out": result.json, "final_weights": F.safetensors}
// train may set precision and grad_dtype (bf16, fp16); "fp16" is the run configuration's [fp16] table.
// batches: a token batch file (docs/formats/token_batch.md) of steps·global_batch rows, step-major.
#include <cstdio>
#include <map>

#include "ckpt/safetensors.h"
#include "cli/blas_select.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "core/file_io.h"
#include "data/token_batch.h"
#include "parallel/engine.h"

using namespace sp;

static int fail(const Status& s) {
  std::fprintf(stderr, "trajectory_driver: %s\n", s.to_string().c_str());
  return 1;
}

int main(int argc, char** argv) {
  cli::select_blas_core(argv);  // the OpenBLAS core shardproof runs (cli/blas_select.h), before any BLAS call
  if (argc != 2) return fail(invalid_argument("usage: trajectory_driver JOB.json"));
  comm::MpiScope mpi(&argc, &argv);
  auto text = read_file(argv[1]);
  if (!text.ok()) return fail(text.status());
  const nlohmann::json job = nlohmann::json::parse(*text);
  nlohmann::json cfg = {{"model", job.at("model")},
                        {"train", job.at("train")},
                        {"data", {{"vocab_size", job.at("model").at("vocab_size")}}}};
  cfg["train"]["eval_batches"] = 0;
  if (job.contains("fp16")) cfg["fp16"] = job.at("fp16");
  auto rc = config::RunConfig::from_json(cfg);
  if (!rc.ok()) return fail(rc.status());
  auto plan = plan::RunPlan::make(*rc, 1);
  if (!plan.ok()) return fail(plan.status());
  auto batches = data::read_token_batch(job.at("batches"), rc->model.vocab_size);
  if (!batches.ok()) return fail(batches.status());
  auto reader = ckpt::SafetensorsReader::open(job.at("weights"));
  if (!reader.ok()) return fail(reader.status());
  std::map<std::string, std::vector<float>> w;
  for (const model::WeightSpec& s : model::weight_table(rc->model)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(s.shape)));
    if (Status st = reader->read_f32(s.name, s.shape, v.data()); !st.ok()) return fail(st);
    w[s.name] = std::move(v);
  }
  auto grid = comm::ProcessGrid::create(1, 1, 1, "tp-dp-pp", 1);
  comm::GridCommunicators comms = comm::make_grid_communicators(*grid);
  comm::TraceContext trace;
  MemoryLedger ledger;
  nlohmann::json out = {{"loss", nlohmann::json::array()},
                        {"grad_norm", nlohmann::json::array()},
                        {"loss_scale", nlohmann::json::array()},
                        {"skipped", nlohmann::json::array()}};
  ckpt::SafetensorsWriter writer;
  std::map<std::string, std::vector<float>> final_w;
  {
    parallel::Engine engine(*plan, *grid, comms, trace, ledger, nullptr, nullptr, nullptr);
    engine.set_parameters([&](const std::string& n) { return w.at(n).data(); });
    const int64_t B = rc->train.micro_batch_size, T1 = rc->train.seq_len + 1, M = plan->micro_batches;
    engine.set_batch_source([&](int64_t s, int64_t mb, int32_t* tok) {
      const int64_t row0 = (s * M + mb) * B;
      std::copy_n(batches->tokens.data() + row0 * T1, B * T1, tok);
    });
    for (int64_t s = 0; s < rc->train.steps; ++s) {
      parallel::StepResult r = engine.step(s, false);
      out["loss"].push_back(r.loss);
      out["grad_norm"].push_back(r.grad_norm);
      out["loss_scale"].push_back(r.loss_scale > 0 ? r.loss_scale : 1.0);
      out["skipped"].push_back(r.skipped);
    }
    for (const model::UnitPiece& p : engine.parameter_pieces())
      for (const model::TensorSlot& t : p.unit->tensors)
        final_w[t.spec.name].assign(p.f32() + t.offset, p.f32() + t.offset + t.numel);
  }
  for (const model::WeightSpec& s : model::weight_table(rc->model))
    writer.add(s.name, DType::kF32, s.shape, final_w.at(s.name).data());
  if (Status st = writer.write(job.at("final_weights")); !st.ok()) return fail(st);
  if (Status st = write_file(job.at("out"), out.dump()); !st.ok()) return fail(st);
  return 0;
}

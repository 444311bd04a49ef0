// Test-only driver for the mixed-precision PyTorch oracle (test_oracle.py part "mixed"): builds one
// LlamaStage directly (pp = tp = 1, one micro-batch) in bf16 or fp16 on a chosen 16-bit GEMM backend,
// with the given fp32 weights rounded to 16 bits by tensor/float16.h, and writes the loss and every
// parameter gradient. (`shardproof grads` goes through the engine, which learns mixed precision in the
// next phase; this driver exercises the model layer alone.)
//   stage16_driver JOB.json   JOB = {"model": {...}, "precision": "bf16"|"fp16", "gemm16": "auto"|"onednn"|
//       "fallback", "grad_dtype": "fp32"|"bf16"|"fp16", "weights": W.safetensors, "tokens": T.bin,
//       "loss_scale": S (optional, default 1), "out": G.safetensors, "rounded_weights": R.safetensors}
// G holds the fp32 gradients (of loss·S, rounded once to grad_dtype if that is 16-bit, then divided by S: fp16
// loss scaling as the engine will apply it), the head's 16-bit logits and dlogits (of loss·S) widened as
// engine.logits and engine.dlogits (N, V) with its input as engine.xf (N, C), the loss in
// its metadata as `shardproof grads` writes it, and the backend name; R the 16-bit weights widened to F32.
#include <fmt/format.h>

#include <cstdio>
#include <map>

#include "ckpt/safetensors.h"
#include "cli/blas_select.h"
#include "core/file_io.h"
#include "data/token_batch.h"
#include "kernels/gemm16.h"
#include "kernels/matmul.h"
#include "model/llama_stage.h"
#include "model/precision.h"
#include "stage_fakes.h"
#include "tensor/float16.h"

using namespace sp;

namespace {

using Params = sp::test::HostParams;
using Grads = sp::test::HostGrads;
using NoTp = sp::test::SingleRankTp;

// Keeps the final norm's output (the LM head's 16-bit input), widened.
struct FinalNorm final : model::ActivationObserver {
  std::vector<float> values;
  void observe(const char* point, int64_t, ConstBufView data) override {
    if (std::string_view(point) != "final_norm") return;
    values.resize(static_cast<size_t>(data.count));
    convert(f32_view(values.data(), data.count), data);
  }
};

int fail(const Status& s) {
  std::fprintf(stderr, "stage16_driver: %s\n", s.to_string().c_str());
  return s.exit_code();
}

Status run(const nlohmann::json& job) {
  SP_ASSIGN_OR_RETURN(const model::LlamaConfig mc, model::LlamaConfig::from_json(job.at("model")));
  SP_ASSIGN_OR_RETURN(const model::Precision prec, model::precision_from_names(job.at("precision").get<std::string>(),
                                                                               job.value("grad_dtype", "fp32")));
  if (!prec.mixed()) return invalid_argument("stage16_driver runs bf16 or fp16, not fp32");
  SP_ASSIGN_OR_RETURN(const kernels::Gemm16Kind kind, kernels::gemm16_kind_from_name(job.value("gemm16", "auto")));
  SP_ASSIGN_OR_RETURN(std::unique_ptr<kernels::Gemm16> gemm, kernels::make_gemm16(kind, prec.compute));
  kernels::set_blas_threads(1);
  SP_ASSIGN_OR_RETURN(data::TokenBatch batch, data::read_token_batch(job.at("tokens"), mc.vocab_size));
  SP_ASSIGN_OR_RETURN(ckpt::SafetensorsReader reader, ckpt::SafetensorsReader::open(job.at("weights")));

  model::StageSpec spec;
  spec.layer_begin = 0;
  spec.layer_end = static_cast<int>(mc.n_layers);
  spec.micro_batch_size = batch.rows;
  spec.seq_len = batch.cols - 1;
  spec.precision = prec.compute;
  spec.gemm16 = gemm.get();
  Params params;
  params.dtype = prec.compute;
  Grads grads;
  grads.grad = prec.grad;
  std::map<std::string, std::vector<float>> rounded, grad_of;
  std::vector<model::UnitLayout> units;
  for (int id = 0; id < model::unit_count(mc); ++id) units.push_back(model::unit_layout(mc, id, 0, 1));
  for (const model::UnitLayout& u : units) {
    std::vector<float> flat(static_cast<size_t>(u.numel));
    for (const model::TensorSlot& t : u.tensors)
      SP_RETURN_IF_ERROR(reader.read_f32(t.spec.name, t.spec.shape, flat.data() + t.offset));
    auto& w16 = params.units16[u.id];
    w16.resize(flat.size());
    float16_from_f32(w16.data(), flat.data(), u.numel, prec.compute);
    f32_from_float16(flat.data(), w16.data(), u.numel, prec.compute);
    for (const model::TensorSlot& t : u.tensors)
      rounded[t.spec.name].assign(flat.begin() + t.offset, flat.begin() + t.offset + t.numel);
    grads.units[u.id].assign(flat.size(), 0.0f);
  }
  const double loss_scale = job.value("loss_scale", 1.0);
  int64_t targets = 0;
  for (int64_t r = 0; r < batch.rows; ++r)
    for (int64_t c = 1; c < batch.cols; ++c) targets += batch.tokens[static_cast<size_t>(r * batch.cols + c)] >= 0;
  if (targets == 0) return invalid_argument("token batch has no target");

  double loss = 0.0;
  std::vector<float> xf, logits, dlogits;  // the head's 16-bit input, logits and dlogits (of loss·S), widened
  {
    MemoryLedger ledger;
    model::LlamaStage stage(mc, spec, ledger);
    auto slot = stage.make_slot(0);
    stage.load_tokens(*slot, batch.tokens.data());
    NoTp tp;
    auto widened = [&] {
      std::vector<float> v(static_cast<size_t>(stage.logits(*slot).count));
      convert(f32_view(v.data(), static_cast<int64_t>(v.size())), stage.logits(*slot));
      return v;
    };
    FinalNorm final_norm;
    loss = stage.forward(*slot, params, tp, &final_norm) / static_cast<double>(targets);
    xf = std::move(final_norm.values);
    logits = widened();
    stage.backward(*slot, params, grads, tp, static_cast<float>(loss_scale / static_cast<double>(targets)));
    dlogits = widened();
  }
  for (auto& [id, g] : grads.units)
    for (float& x : g) x = static_cast<float>(x / loss_scale);
  for (const model::UnitLayout& u : units)
    for (const model::TensorSlot& t : u.tensors) {
      const std::vector<float>& g = grads.units.at(u.id);
      grad_of[t.spec.name].assign(g.begin() + t.offset, g.begin() + t.offset + t.numel);
    }
  ckpt::SafetensorsWriter gw, rw;
  for (const model::WeightSpec& s : model::weight_table(mc)) {
    gw.add(s.name, DType::kF32, s.shape, grad_of.at(s.name).data());
    rw.add(s.name, DType::kF32, s.shape, rounded.at(s.name).data());
  }
  const std::vector<int64_t> nv = {batch.rows * (batch.cols - 1), mc.vocab_size};
  gw.add("engine.xf", DType::kF32, {nv[0], mc.dim}, xf.data());
  gw.add("engine.logits", DType::kF32, nv, logits.data());
  gw.add("engine.dlogits", DType::kF32, nv, dlogits.data());
  gw.set_metadata("format", "shardproof-grads");
  gw.set_metadata("loss", fmt::format("{:.17g}", loss));
  gw.set_metadata("gemm16", gemm->name());
  SP_RETURN_IF_ERROR(gw.write(job.at("out")));
  return rw.write(job.at("rounded_weights"));
}

}  // namespace

int main(int argc, char** argv) {
  cli::select_blas_core(argv);  // the OpenBLAS core shardproof runs (cli/blas_select.h), before any BLAS call
  if (argc != 2) return fail(invalid_argument("usage: stage16_driver JOB.json"));
  auto text = read_file(argv[1]);
  if (!text.ok()) return fail(text.status());
  const nlohmann::json job = nlohmann::json::parse(*text, nullptr, false);
  if (job.is_discarded()) return fail(invalid_argument("{} is not valid JSON", argv[1]));
  const Status s = run(job);
  return s.ok() ? 0 : fail(s);
}

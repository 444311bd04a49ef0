#include "parallel/fault_injector.h"

#include <csignal>
#include <cstring>
#include <limits>

#include "core/log.h"
#include "parallel/parameter_server.h"

namespace sp::parallel {

using evidence::FaultKind;

bool FaultInjector::fires(FaultKind kind, int64_t step) const {
  return fault_.fires(kind, step, t_.world != nullptr ? t_.world->rank() : 0);
}

int FaultInjector::first_block() const {
  for (const model::UnitLayout* u : t_.units)
    if (u->kind == model::UnitKind::kBlock) return u->id;
  return -1;
}

void FaultInjector::arm(const evidence::FaultSpec& fault, Targets targets) {
  fault_ = fault;
  t_ = std::move(targets);
  // A parameter server holds no gradient store: the faults on a worker's micro-batches leave it alone.
  if (t_.grads == nullptr && (fault_.kind == FaultKind::kStaleGrad || fault_.kind == FaultKind::kNanInjection)) return;
  switch (fault_.kind) {
    case FaultKind::kSkipGradAllreduce:
    case FaultKind::kStaleGrad:
    case FaultKind::kNanInjection:
    case FaultKind::kTpGradScale:
      t_.grads->set_hooks(gradient_hooks());
      break;
    case FaultKind::kDropTpAllreduce:
      // The first block's o_proj reduction is call 1 on the stage holding the embedding (call 0 is the
      // vocabulary-parallel lookup).
      t_.tp->set_forward_reduce_hook([this] {
        const int64_t call = tp_reduce_calls_++;
        return !(call == 1 && t_.coords.pp == 0 && fires(FaultKind::kDropTpAllreduce, step_));
      });
      break;
    case FaultKind::kDropSpNormGradReduce:
      t_.tp->set_replicated_grad_reduce_hook([this] { return !fires(FaultKind::kDropSpNormGradReduce, step_); });
      break;
    case FaultKind::kZero3StaleParam:
      if (t_.params->zero() == 3)
        t_.params->set_gather_source([this](int unit, const void* shard) -> const void* {
          const bool stale = unit == stale_unit_ && fires(FaultKind::kZero3StaleParam, step_);
          return stale ? stale_shard_.data() : shard;
        });
      break;
    case FaultKind::kPsDropPush:
    case FaultKind::kPsApplyTwice:
    case FaultKind::kPsStalePull:
      arm_parameter_server();
      break;
    case FaultKind::kDataOrder:
      if (t_.train != nullptr) {
        data::LoaderSpec other = t_.loader;
        other.seed += 1;
        other_seed_.emplace(*t_.train, other);
      }
      break;
    default:
      break;
  }
}

GradStore::Hooks FaultInjector::gradient_hooks() {
  GradStore::Hooks hooks;
  switch (fault_.kind) {
    case FaultKind::kSkipGradAllreduce: {
      // The unit skipped is the first block this rank holds, or its first unit: the same on every dp
      // rank of a pipeline stage, so the dp group stays in step (no hang) and silently diverges.
      const int target = first_block() >= 0 ? first_block() : t_.units.front()->id;
      hooks.sync = [this, target](int unit, BufView) {
        return !(unit == target && fires(FaultKind::kSkipGradAllreduce, step_));
      };
      break;
    }
    case FaultKind::kStaleGrad: {  // reused leaves keep last step's values
      hooks.zero_reused = [this](int) { return !fires(FaultKind::kStaleGrad, step_); };
      break;
    }
    case FaultKind::kNanInjection: {  // the first leaf handed back in the step gets a NaN
      hooks.leaf_done = [this, last = int64_t{-1}](int, BufView leaf) mutable {
        if (fires(FaultKind::kNanInjection, step_) && last != step_) {
          leaf.f32()[0] = std::numeric_limits<float>::quiet_NaN();
          last = step_;
        }
      };
      break;
    }
    case FaultKind::kTpGradScale: {
      // Before the dp sync of the first block this rank holds: its o_proj shard, scaled in fp32 (16-bit
      // gradients: each pattern widened, scaled and rounded back).
      const int target = first_block();
      const float factor = t_.mixed_precision ? kTpGradFactor16 : kTpGradFactor;
      const auto o_proj = [this](int unit) -> const model::TensorSlot* {
        for (const model::UnitLayout* u : t_.units)
          if (u->id == unit) return &u->tensor("o_proj.weight");
        return nullptr;
      };
      hooks.sync = [this, target, factor, o_proj](int unit, BufView total) {
        if (unit != target || !fires(FaultKind::kTpGradScale, step_)) return true;
        if (const model::TensorSlot* t = o_proj(unit)) {
          const BufView w = total.slice(t->offset, t->numel);
          std::vector<float> wide(static_cast<size_t>(t->numel));
          convert(f32_view(wide.data(), t->numel), w);
          for (float& x : wide) x *= factor;
          convert(w, f32_view(wide.data(), t->numel));
        }
        return true;
      };
      break;
    }
    default:
      break;
  }
  return hooks;
}

void FaultInjector::arm_parameter_server() {
  switch (fault_.kind) {
    case FaultKind::kPsDropPush: {
      // Server `rank` does not receive worker 0's push at the step, and worker 0 does not send it (an
      // unmatched send would never complete): the sum misses worker 0's gradient.
      PsHooks hooks;
      if (auto* server = dynamic_cast<PsServerUpdate*>(t_.update); server != nullptr) {
        hooks.push_received = [this](int64_t step, int worker) {
          return !(worker == 0 && fires(FaultKind::kPsDropPush, step));
        };
        server->set_hooks(std::move(hooks));
      } else if (auto* worker = dynamic_cast<PsWorkerUpdate*>(t_.update); worker != nullptr && t_.world->rank() == 0) {
        hooks.push_sent = [this](int64_t step, int server_index) {
          return !(t_.workers + server_index == fault_.rank && step == fault_.step);
        };
        worker->set_hooks(std::move(hooks));
      }
      break;
    }
    case FaultKind::kPsApplyTwice:
      if (auto* server = dynamic_cast<PsServerUpdate*>(t_.update); server != nullptr) {
        PsHooks hooks;
        hooks.updates = [this](int64_t step) { return fires(FaultKind::kPsApplyTwice, step) ? 2 : 1; };
        server->set_hooks(std::move(hooks));
      }
      break;
    case FaultKind::kPsStalePull:
      if (auto* worker = dynamic_cast<PsWorkerUpdate*>(t_.update); worker != nullptr) {
        PsHooks hooks;
        hooks.pull_taken = [this](int64_t step) { return !fires(FaultKind::kPsStalePull, step); };
        worker->set_hooks(std::move(hooks));
      }
      break;
    default:
      break;
  }
}

void FaultInjector::before_step(int64_t step) {
  step_ = step;
  tp_reduce_calls_ = 0;
}

void FaultInjector::tokens(int64_t mb, int64_t first, int32_t* buf, const BatchSource& load) const {
  // pp-microbatch-swap: the last stage loads micro-batch 1's targets for 0 and 0's for 1.
  if (fires(FaultKind::kPpMicrobatchSwap, step_) && t_.coords.pp == t_.pp_size - 1 && mb - first < 2)
    mb = first + (1 - (mb - first));
  if (fires(FaultKind::kDataOrder, step_) && other_seed_.has_value())
    other_seed_->micro_batch(step_, mb, buf);
  else
    load(step_, mb, buf);
}

int FaultInjector::weight_passes(int64_t mb, int64_t first) const {
  if (mb != first) return 1;
  if (fires(FaultKind::kZbDropW, step_)) return 0;
  return fires(FaultKind::kZbRepeatW, step_) ? 2 : 1;
}

float FaultInjector::loss_scale(float scale) const {
  if (!fires(FaultKind::kWrongLossScale, step_)) return scale;
  return static_cast<float>(1.0 / static_cast<double>(t_.micro_batch_tokens));
}

void FaultInjector::after_backward() {
  if (fires(FaultKind::kRankCrash, step_)) {
    log_error("fault rank-crash: world rank {} kills itself at step {}", t_.world->rank(), step_);
    std::raise(SIGKILL);
  }
  if (fires(FaultKind::kDesyncExtraCollective, step_)) {
    comm::ScopedPhase phase(*t_.trace, comm::Phase::kEvidence, step_);
    int64_t extra = 1;
    t_.world->all_reduce(&extra, 1, DType::kI64, comm::ReduceOp::kSum);
  }
}

void FaultInjector::before_update() {
  // zero3-stale-param at step s + 1: keep the first block's shard as it is before this update.
  if (fault_.kind != FaultKind::kZero3StaleParam || !fires(FaultKind::kZero3StaleParam, step_ + 1) ||
      t_.params->zero() != 3)
    return;
  stale_unit_ = first_block();
  // The bytes the all-gather sends (16-bit working weights in mixed precision).
  const auto [data, bytes] = t_.params->working_shard(stale_unit_);
  stale_shard_.assign(static_cast<const char*>(data), static_cast<const char*>(data) + bytes);
}

Status FaultInjector::after_checkpoint(const std::string& step_dir) const {
  if (!evidence::is_checkpoint_fault(fault_.kind) || fault_.step != step_ || t_.world->rank() != 0) return Status();
  return evidence::damage_checkpoint(fault_, step_dir);
}

}  // namespace sp::parallel

#include "parallel/update_strategy.h"

namespace sp::parallel {
namespace {

std::vector<optim::OwnedRange> ranges_of(const std::vector<model::UnitPiece>& pieces) {
  std::vector<optim::OwnedRange> out;
  for (const model::UnitPiece& p : pieces) out.push_back({p.unit, p.begin, p.end});
  return out;
}

}  // namespace

AllReduceUpdate::AllReduceUpdate(ParamStore& params, GradStore& grads, const optim::AdamWConfig& adamw,
                                 MemoryLedger& ledger, const comm::ProcessGrid& grid, int zero, int dp_rank)
    : params_(params),
      grads_(grads),
      optimizer_(adamw, ranges_of(params.owned()), ledger),
      grid_(grid),
      zero_(zero),
      dp_rank_(dp_rank) {}

void AllReduceUpdate::update(int64_t, double lr, float clip, bool apply, const std::function<void()>& before) {
  if (!apply) return;
  if (before) before();
  // AdamW on the pieces this rank owns (fp32 master weights in mixed precision), then the rounding into
  // the working copy and the ZeRO-1/2 all-gather of the updated shards.
  std::vector<float*> p;
  for (const model::UnitPiece& piece : params_.owned()) p.push_back(piece.f32());
  optimizer_.step(p, grads_.owned_grads(), lr, clip);  // fp32 or 16-bit gradients (kernels/adamw.h widens)
  params_.publish();
}

std::vector<StatePiece> AllReduceUpdate::state() {
  std::vector<StatePiece> out;
  const std::vector<model::UnitPiece> owned = params_.owned();
  for (size_t i = 0; i < owned.size(); ++i)
    out.push_back({owned[i].unit, owned[i].begin, owned[i].end, owned[i].f32(), optimizer_.exp_avg(i).f32(),
                   optimizer_.exp_avg_sq(i).f32()});
  return out;
}

bool AllReduceUpdate::saves_state() const { return zero_ > 0 || dp_rank_ == 0; }

int AllReduceUpdate::replica_of(int world_rank) const {
  // Ranks of one dp group hold full replicas (zero < 3); under ZeRO-3 replicas hold different shards
  // by design (the trace checker compares the all-gathered outputs instead).
  if (grid_.dp_size() == 1 || zero_ == 3) return -1;
  comm::Coords c = grid_.coords_of(world_rank);
  c.dp = 0;
  return grid_.rank_of(c);
}

}  // namespace sp::parallel

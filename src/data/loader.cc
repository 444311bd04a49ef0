#include "data/loader.h"

#include "core/check.h"
#include "core/rng.h"

namespace sp::data {

WindowPermutation::WindowPermutation(int64_t n, uint64_t seed, int64_t epoch) : n_(n), seed_(seed), epoch_(epoch) {
  SP_CHECK_GE(n, 1, "permutation domain");
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

int64_t WindowPermutation::operator()(int64_t x) const {
  SP_CHECK(x >= 0 && x < n_, "permutation input {} outside [0, {})", x, n_);
  if (half_bits_ == 0) return x;
  const PhiloxKey key = philox_key(seed_, fmt::format("data.loader.epoch.{}", epoch_));
  uint64_t v = static_cast<uint64_t>(x);
  // Cycle walking: apply the Feistel permutation of [0, 4^h) until the value falls inside [0, n).
  // It terminates because following the cycle through x must come back to x, which is < n.
  do {
    uint64_t left = v >> half_bits_, right = v & half_mask_;
    for (uint32_t round = 0; round < 4; ++round) {
      const uint64_t f = random_u64(key, right, round) & half_mask_;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    v = (left << half_bits_) | right;
  } while (v >= static_cast<uint64_t>(n_));
  return static_cast<int64_t>(v);
}

Status Loader::validate(const TokenDataset& train, const LoaderSpec& s) {
  if (s.micro_batch_size < 1 || s.seq_len < 1 || s.micro_batches < 1)
    return invalid_argument(
        "loader needs micro_batch_size (B) ≥ 1, seq_len (T) ≥ 1 and micro_batches (M) ≥ 1; got "
        "B = {}, T = {}, M = {}",
        s.micro_batch_size, s.seq_len, s.micro_batches);
  if (train.num_tokens() - 1 < s.seq_len)
    return invalid_argument(
               "the {} split of '{}' has {} tokens: W = (N − 1) / T = ({} − 1) / {} = 0 windows of T+1 tokens",
               split_name(train.split()), train.dir(), train.num_tokens(), train.num_tokens(), s.seq_len)
        .with_hint("use a shorter seq_len or a larger corpus");
  return Status();
}

Result<Loader> Loader::create(const TokenDataset& train, LoaderSpec spec) {
  SP_RETURN_IF_ERROR(validate(train, spec));
  return Loader(train, spec);
}

Loader::Loader(const TokenDataset& train, LoaderSpec spec) : train_(&train), spec_(spec) {
  const Status s = validate(train, spec);
  SP_CHECK(s.ok(), "{}", s.message());
  windows_ = (train.num_tokens() - 1) / spec.seq_len;
}

int64_t Loader::window_of(int64_t step, int64_t mb, int64_t b) const {
  SP_CHECK(step >= 0 && mb >= 0 && mb < spec_.micro_batches && b >= 0 && b < spec_.micro_batch_size,
           "loader position step {} mb {} b {} outside M = {}, B = {}", step, mb, b, spec_.micro_batches,
           spec_.micro_batch_size);
  const int64_t g = (step * spec_.micro_batches + mb) * spec_.micro_batch_size + b;
  SP_CHECK(g >= 0, "loader sample index overflow at step {}", step);
  return WindowPermutation(windows_, spec_.seed, g / windows_)(g % windows_);
}

void Loader::micro_batch(int64_t step, int64_t mb, int32_t* tokens) const {
  const int64_t T = spec_.seq_len;
  const std::vector<uint32_t>& all = train_->tokens();
  for (int64_t b = 0; b < spec_.micro_batch_size; ++b) {
    const int64_t w = window_of(step, mb, b);
    const uint32_t* src = all.data() + w * T;
    int32_t* dst = tokens + b * (T + 1);
    for (int64_t t = 0; t <= T; ++t) dst[t] = static_cast<int32_t>(src[t]);
  }
}

nlohmann::json Loader::cursor(int64_t next_step) const {
  return {{"format", "shardproof-loader-cursor"},
          {"version", 1},
          {"next_step", next_step},
          {"seed", spec_.seed},
          {"micro_batch_size", spec_.micro_batch_size},
          {"seq_len", spec_.seq_len},
          {"micro_batches", spec_.micro_batches},
          {"num_tokens", train_->num_tokens()},
          {"windows", windows_},
          {"shards_sha256", train_->identity().shards_sha256}};
}

Result<int64_t> Loader::restore(const nlohmann::json& c) const {
  if (!c.is_object() || c.value("format", "") != "shardproof-loader-cursor" || !c.contains("version") ||
      c["version"] != 1)
    return invalid_argument("loader cursor is not a shardproof-loader-cursor version 1 object");
  const nlohmann::json now = cursor(0);
  for (const char* key :
       {"seed", "micro_batch_size", "seq_len", "micro_batches", "num_tokens", "windows", "shards_sha256"}) {
    if (!c.contains(key)) return invalid_argument("loader cursor has no '{}'", key);
    if (c[key] != now[key])
      return failed_precondition("loader cursor field '{}' is {} in the checkpoint but {} now", key, c[key].dump(),
                                 now[key].dump())
          .with_hint("resume with the same data, seed, batch shape and micro-batch count as the run that saved it");
  }
  if (!c.contains("next_step") || !c["next_step"].is_number_integer() || c["next_step"].get<int64_t>() < 0)
    return invalid_argument("loader cursor 'next_step' must be a non-negative integer");
  return c["next_step"].get<int64_t>();
}

EvalSet::EvalSet(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len, int64_t max_batches)
    : eval_(&eval), b_(micro_batch_size), t_(seq_len) {
  SP_CHECK(b_ >= 1 && t_ >= 1, "EvalSet needs B ≥ 1 and T ≥ 1, got B = {}, T = {}", b_, t_);
  const int64_t windows = eval.num_tokens() > 0 ? (eval.num_tokens() - 1) / t_ : 0;
  batches_ = windows / b_;
  if (max_batches >= 0 && max_batches < batches_) batches_ = max_batches;
}

Result<EvalSet> EvalSet::create(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len,
                                int64_t max_batches) {
  if (micro_batch_size < 1 || seq_len < 1)
    return invalid_argument("eval set needs B ≥ 1 and T ≥ 1, got B = {}, T = {}", micro_batch_size, seq_len);
  EvalSet e(eval, micro_batch_size, seq_len, max_batches);
  if (e.batches() == 0)
    return invalid_argument("the eval split of '{}' has {} tokens: not one batch of B = {} windows of T+1 = {} tokens",
                            eval.dir(), eval.num_tokens(), micro_batch_size, seq_len + 1)
        .with_hint("use a smaller batch or seq_len, or a larger eval fraction");
  return e;
}

Status EvalSet::validate(const TokenDataset& eval, int64_t micro_batch_size, int64_t seq_len, int64_t batches) {
  if (micro_batch_size < 1 || seq_len < 1 || batches < 1)
    return invalid_argument("eval set needs B ≥ 1, T ≥ 1 and at least one batch, got B = {}, T = {}, {} batches",
                            micro_batch_size, seq_len, batches);
  const EvalSet all(eval, micro_batch_size, seq_len, -1);
  if (all.batches() >= batches) return Status();
  return invalid_argument(
             "the eval split of '{}' has {} tokens: {} batch{} of B = {} windows of T+1 = {} tokens, fewer "
             "than the {} evaluation batches asked for",
             eval.dir(), eval.num_tokens(), all.batches(), all.batches() == 1 ? "" : "es", micro_batch_size,
             seq_len + 1, batches)
      .with_hint("use a smaller batch or seq_len, a larger eval fraction, or fewer evaluation batches");
}

void EvalSet::batch(int64_t i, int32_t* tokens) const {
  SP_CHECK(i >= 0 && i < batches_, "eval batch {} outside [0, {})", i, batches_);
  const std::vector<uint32_t>& all = eval_->tokens();
  for (int64_t b = 0; b < b_; ++b) {
    const uint32_t* src = all.data() + (i * b_ + b) * t_;
    int32_t* dst = tokens + b * (t_ + 1);
    for (int64_t t = 0; t <= t_; ++t) dst[t] = static_cast<int32_t>(src[t]);
  }
}

}  // namespace sp::data

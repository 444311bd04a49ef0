#include "evidence/activations.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <tuple>

#include "core/exact_sum.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"
#include "core/time_split.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kFinalNormOrder = std::numeric_limits<int64_t>::max() - 1;
constexpr int64_t kLogitsOrder = std::numeric_limits<int64_t>::max();

Result<ActivationRecord> parse_record(const nlohmann::json& j, const std::string& where) {
  auto need = [&](const char* key, bool ok) -> Status {
    if (!j.contains(key)) return corrupt("{}: no field '{}'", where, key);
    if (!ok) return corrupt("{}: field '{}' has the wrong type", where, key);
    return Status();
  };
  SP_RETURN_IF_ERROR(need("step", j.contains("step") && j["step"].is_number_integer()));
  SP_RETURN_IF_ERROR(need("micro_batch", j.contains("micro_batch") && j["micro_batch"].is_number_integer()));
  SP_RETURN_IF_ERROR(need("point", j.contains("point") && j["point"].is_string()));
  SP_RETURN_IF_ERROR(need("rank", j.contains("rank") && j["rank"].is_number_integer()));
  SP_RETURN_IF_ERROR(need("digest", j.contains("digest") && j["digest"].is_string()));
  SP_RETURN_IF_ERROR(need("l2", j.contains("l2") && (j["l2"].is_number() || j["l2"].is_null())));
  SP_RETURN_IF_ERROR(need("numel", j.contains("numel") && j["numel"].is_number_integer()));
  ActivationRecord r;
  r.step = j["step"].get<int64_t>();
  r.micro_batch = j["micro_batch"].get<int64_t>();
  r.point = j["point"].get<std::string>();
  r.rank = j["rank"].get<int>();
  r.digest = j["digest"].get<std::string>();
  r.l2 = j["l2"].is_null() ? std::nan("") : j["l2"].get<double>();
  r.numel = j["numel"].get<int64_t>();
  if (!activation_point_order(r.point).has_value())
    return corrupt("{}: unknown point '{}' (expected embed, block.<i>, final_norm or logits)", where, r.point);
  if (r.step < 0 || r.micro_batch < 0 || r.numel < 0) return corrupt("{}: negative step, micro_batch or numel", where);
  if (!Digest128::from_hex(r.digest).ok()) return corrupt("{}: digest '{}' is not 32 hex digits", where, r.digest);
  return r;
}

std::string l2_text(double v) { return std::isnan(v) ? "non-finite" : fmt::format("{:.9g}", v); }

}  // namespace

nlohmann::json ActivationRecord::to_json() const { return nlohmann::json::parse(to_line()); }

std::string ActivationRecord::to_line() const {
  nlohmann::ordered_json j;  // fields in the documented order
  j["step"] = step;
  j["micro_batch"] = micro_batch;
  j["point"] = point;
  j["rank"] = rank;
  j["digest"] = digest;
  j["l2"] = std::isfinite(l2) ? nlohmann::ordered_json(l2) : nlohmann::ordered_json(nullptr);
  j["numel"] = numel;
  return j.dump();
}

ActivationRecord make_activation_record(int64_t step, int64_t micro_batch, std::string_view point, int rank,
                                        ConstBufView data) {
  ActivationRecord r;
  r.step = step;
  r.micro_batch = micro_batch;
  r.point = std::string(point);
  r.rank = rank;
  r.numel = data.count;
  ExactSum sum;
  Xxh3Stream digest;  // over the pieces: xxh3_128 of the whole fp32 array
  for_each_f32_block(data, [&](const float* v, int64_t, int64_t n) {
    digest.update(v, sizeof(float) * static_cast<size_t>(n));
    sum.add(v, static_cast<size_t>(n));
  });
  r.digest = digest.digest().hex();
  r.l2 = sum.finite() ? sum.l2_norm() : std::nan("");
  return r;
}

std::optional<int64_t> activation_point_order(std::string_view point) {
  if (point == "embed") return 0;
  if (point == "final_norm") return kFinalNormOrder;
  if (point == "logits") return kLogitsOrder;
  if (!point.starts_with("block.")) return std::nullopt;
  const std::string_view digits = point.substr(6);
  int64_t layer = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || layer < 0 ||
      (digits.size() > 1 && digits[0] == '0') || layer >= kFinalNormOrder - 1)
    return std::nullopt;
  return 1 + layer;
}

Status prepare_activation_dir(const std::string& run_dir, int64_t keep_before_step) {
  const std::string dir = RunPaths(run_dir).activations_dir();
  if (!path_exists(dir)) return Status();
  SP_ASSIGN_OR_RETURN(const std::vector<RankFile> files, list_rank_files(dir));
  for (const auto& [rank, path] : files) {
    std::error_code ec;
    if (keep_before_step <= 0) {
      fs::remove(path, ec);
      if (ec) return io_error("cannot remove '{}': {}", path, ec.message());
      continue;
    }
    SP_ASSIGN_OR_RETURN(const std::string text, read_file(path));
    std::string kept;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a line cut by a crash
      const std::string_view line(text.data() + pos, nl - pos);
      const auto j = parse_json_strict(line, path);
      if (j.ok() && j->is_object() && j->contains("step") && (*j)["step"].is_number_integer() &&
          (*j)["step"].get<int64_t>() < keep_before_step)
        kept.append(text, pos, nl + 1 - pos);
      pos = nl + 1;
    }
    if (kept.size() != text.size()) SP_RETURN_IF_ERROR(write_file_atomic(path, kept));
  }
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Recording

ActivationRecorder::ActivationRecorder(JsonlWriter out, int rank, bool writes, bool logits)
    : out_(std::move(out)), rank_(rank), writes_(writes), logits_(logits) {}

Result<std::unique_ptr<ActivationRecorder>> ActivationRecorder::open(const std::string& run_dir, int rank, int tp_rank,
                                                                     int tp_size) {
  const RunPaths paths(run_dir);
  SP_RETURN_IF_ERROR(make_directories(paths.activations_dir()));
  SP_ASSIGN_OR_RETURN(JsonlWriter out, JsonlWriter::open(paths.activations(rank), JsonlWriter::Mode::kAppend));
  return std::unique_ptr<ActivationRecorder>(new ActivationRecorder(std::move(out), rank, tp_rank == 0, tp_size == 1));
}

void ActivationRecorder::observe(const char* point, int64_t micro_batch, ConstBufView data) {
  if (!writes_ || step_ < 0) return;
  const TimeScope timed(TimeKind::kEvidence);
  const std::string_view p(point);
  if (p == "logits" && !logits_) return;
  out_.write_line(make_activation_record(step_, micro_batch, p, rank_, data).to_line());
  (void)out_.flush();  // one record per write(2): a killed rank leaves whole lines; an error is kept
  ++records_;
}

// ---------------------------------------------------------------------------------------------
// Reading and comparing

Result<ActivationTrace> read_activations(const std::string& run_dir) {
  ActivationTrace trace;
  const std::string dir = RunPaths(run_dir).activations_dir();
  if (!path_exists(dir)) return trace;
  trace.recorded = true;
  SP_ASSIGN_OR_RETURN(const std::vector<RankFile> files, list_rank_files(dir));
  std::map<std::tuple<int64_t, int64_t, std::string>, std::string> seen;  // key → "file:line"
  for (const auto& [rank, path] : files) {
    // A last line cut by a crash is ignored (docs/formats/activations.md).
    SP_ASSIGN_OR_RETURN(const JsonlDocument doc, read_jsonl_file(path, TornTail::kAllow, uint64_t{1} << 32));
    for (size_t i = 0; i < doc.records.size(); ++i) {
      const std::string where = fmt::format("{}:{}", path, doc.line_numbers[i]);
      SP_ASSIGN_OR_RETURN(ActivationRecord r, parse_record(doc.records[i], where));
      auto [it, fresh] = seen.emplace(std::make_tuple(r.step, r.micro_batch, r.point), where);
      if (!fresh)
        return corrupt("{}: step {} micro-batch {} point {} was already recorded at {}", where, r.step, r.micro_batch,
                       r.point, it->second)
            .with_hint(
                "each (step, micro_batch, point) is written once by one rank; was the run directory reused "
                "by two runs at once?");
      trace.records.push_back(std::move(r));
    }
  }
  return trace;
}

nlohmann::json ActivationDifference::to_json() const {
  auto l2 = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"step", step},
          {"micro_batch", micro_batch},
          {"point", point},
          {"rank", rank},
          {"ref_rank", ref_rank},
          {"got_digest", got_digest},
          {"want_digest", want_digest},
          {"got_l2", l2(got_l2)},
          {"want_l2", l2(want_l2)},
          {"rel_l2", l2(rel_l2)},
          {"got_numel", got_numel},
          {"want_numel", want_numel},
          {"message", message}};
}

nlohmann::json ActivationComparison::to_json() const {
  nlohmann::json j = {{"recorded", recorded},
                      {"reference_recorded", reference_recorded},
                      {"mode", bitwise ? "bitwise" : "tolerance"},
                      {"tolerance", tolerance},
                      {"compared", compared},
                      {"bitwise_equal", bitwise_equal},
                      {"differing", differing},
                      {"unmatched", unmatched},
                      {"first_step", first_step},
                      {"last_step", last_step},
                      {"max_rel_l2", std::isfinite(max_rel_l2) ? nlohmann::json(max_rel_l2) : nlohmann::json(nullptr)},
                      {"equal", equal()}};
  j["first_difference"] = first ? first->to_json() : nlohmann::json(nullptr);
  j["differing_per_step"] = nlohmann::json::array();
  for (const auto& [s, n] : differing_per_step) j["differing_per_step"].push_back({{"step", s}, {"records", n}});
  return j;
}

std::string ActivationComparison::summary() const {
  if (!recorded) return "activations: the run recorded none (evidence.activation_digests = false)\n";
  if (!reference_recorded) return "activations: the reference recorded none (evidence.activation_digests = false)\n";
  std::string s = fmt::format("activations: {} records compared over steps {}..{} ({} bitwise equal), mode {}",
                              compared, first_step, last_step, bitwise_equal,
                              bitwise ? std::string("bitwise") : fmt::format("tolerance {:g}", tolerance));
  if (!bitwise) s += fmt::format(", max relative L2 difference {:.3g}", max_rel_l2);
  s += "\n";
  if (unmatched > 0)
    s += fmt::format("  {} run records at steps the reference did not reach (not compared)\n", unmatched);
  if (!first) return s + "  no difference\n";
  s += fmt::format("  first difference: {}\n", first->message);
  s += "  differing records per step:";
  for (const auto& [step, n] : differing_per_step) s += fmt::format(" {}:{}", step, n);
  return s + "\n";
}

namespace {

// One (step, point, micro-batch) of the run (`a`) against the reference's (`b`), either may be missing: fills
// `d` and counts what was compared in `out`; true when the record differs beyond the class.
bool record_differs(const ActivationRecord* a, const ActivationRecord* b, bool bitwise, double rel_tol,
                    ActivationComparison& out, ActivationDifference& d) {
  d.point = (a != nullptr ? a : b)->point;
  const std::string at = fmt::format("step {}, point {}, micro-batch {}", d.step, d.point, d.micro_batch);
  if (a != nullptr)
    std::tie(d.rank, d.got_digest, d.got_l2, d.got_numel) = std::tie(a->rank, a->digest, a->l2, a->numel);
  if (b != nullptr)
    std::tie(d.ref_rank, d.want_digest, d.want_l2, d.want_numel) = std::tie(b->rank, b->digest, b->l2, b->numel);
  if (a == nullptr) {
    d.message = fmt::format("{}: missing in the run (the reference's rank {} recorded it)", at, b->rank);
    return true;
  }
  if (b == nullptr) {
    d.message = fmt::format("{} (rank {}): not in the reference", at, a->rank);
    return true;
  }
  ++out.compared;
  const bool same_bits = a->digest == b->digest && a->numel == b->numel;
  if (same_bits) ++out.bitwise_equal;
  const bool finite = std::isfinite(a->l2) && std::isfinite(b->l2);
  d.rel_l2 = !finite      ? std::nan("")
             : b->l2 != 0 ? std::fabs(a->l2 - b->l2) / std::fabs(b->l2)
             : a->l2 == 0 ? 0.0
                          : std::numeric_limits<double>::infinity();
  if (!same_bits) out.max_rel_l2 = std::isnan(d.rel_l2) ? d.rel_l2 : std::max(out.max_rel_l2, d.rel_l2);
  if (a->numel != b->numel) {
    d.message = fmt::format("{} (rank {}): {} values, the reference has {}", at, a->rank, a->numel, b->numel);
    return true;
  }
  if (bitwise ? !same_bits : (!same_bits && !(finite && d.rel_l2 <= rel_tol))) {
    d.message = fmt::format("{} (rank {}): digest {} ≠ reference {}; L2 {} vs {} (relative difference {:.3g}{})", at,
                            a->rank, a->digest, b->digest, l2_text(a->l2), l2_text(b->l2), d.rel_l2,
                            bitwise ? "" : fmt::format(" > tolerance {:g}", rel_tol));
    return true;
  }
  return false;
}

}  // namespace

Result<ActivationComparison> compare_activations(const std::string& run_dir, const std::string& ref_dir, bool bitwise,
                                                 double rel_tol, const std::vector<int64_t>& only_steps) {
  ActivationComparison out;
  out.bitwise = bitwise;
  out.tolerance = bitwise ? 0.0 : rel_tol;
  SP_ASSIGN_OR_RETURN(const ActivationTrace run, read_activations(run_dir));
  SP_ASSIGN_OR_RETURN(const ActivationTrace ref, read_activations(ref_dir));
  out.recorded = run.recorded;
  out.reference_recorded = ref.recorded;
  if (!run.recorded || !ref.recorded) return out;

  // Forward order: step, then point, then micro-batch.
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  auto key = [](const ActivationRecord& r) { return Key{r.step, *activation_point_order(r.point), r.micro_batch}; };
  std::map<Key, const ActivationRecord*> got, want;
  int64_t run_min = std::numeric_limits<int64_t>::max(), run_max = -1, ref_max = -1;
  for (const ActivationRecord& r : run.records) {
    got[key(r)] = &r;
    run_min = std::min(run_min, r.step);
    run_max = std::max(run_max, r.step);
  }
  for (const ActivationRecord& r : ref.records) {
    want[key(r)] = &r;
    ref_max = std::max(ref_max, r.step);
  }
  // The steps compared: those the run reached, as far as the reference reached them.
  const int64_t lo = run_min, hi = std::min(run_max, ref_max);
  if (run_max >= 0 && lo <= hi) {
    out.first_step = lo;
    out.last_step = hi;
  }
  for (const auto& [k, r] : got)
    if (std::get<0>(k) > hi) ++out.unmatched;

  // Logits are recorded only at tp = 1 (under tp > 1 they are vocabulary shards): compared only when
  // both sides have them.
  auto has_logits = [](const ActivationTrace& t) {
    return std::any_of(t.records.begin(), t.records.end(),
                       [](const ActivationRecord& r) { return r.point == "logits"; });
  };
  const bool logits = has_logits(run) && has_logits(ref);
  // The residual stream (embed, block.<i>) is a sequence shard under sequence parallelism, so such a run
  // records only final_norm (gathered): the residual points are compared only when both sides have them.
  auto has_residual = [](const ActivationTrace& t) {
    return std::any_of(t.records.begin(), t.records.end(),
                       [](const ActivationRecord& r) { return r.point == "embed" || r.point.starts_with("block."); });
  };
  const bool residual = has_residual(run) && has_residual(ref);
  auto in_range = [&](const Key& k) {
    const int64_t s = std::get<0>(k);
    if (!only_steps.empty() && std::find(only_steps.begin(), only_steps.end(), s) == only_steps.end()) return false;
    return s >= lo && s <= hi && (logits || std::get<1>(k) != kLogitsOrder) &&
           (residual || std::get<1>(k) >= kFinalNormOrder);
  };
  std::vector<Key> keys;
  for (const auto& [k, r] : got)
    if (in_range(k)) keys.push_back(k);
  for (const auto& [k, r] : want)
    if (in_range(k) && !got.contains(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());

  for (const Key& k : keys) {
    const auto g = got.find(k), w = want.find(k);
    ActivationDifference d;
    d.step = std::get<0>(k);
    d.micro_batch = std::get<2>(k);
    const bool differs = record_differs(g == got.end() ? nullptr : g->second, w == want.end() ? nullptr : w->second,
                                        bitwise, rel_tol, out, d);
    if (!differs) continue;
    ++out.differing;
    if (!out.first) out.first = d;
    if (out.differing_per_step.empty() || out.differing_per_step.back().first != d.step)
      out.differing_per_step.emplace_back(d.step, 0);
    ++out.differing_per_step.back().second;
  }
  return out;
}

}  // namespace sp::evidence

#include "judge/records.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>

#include "core/exact_sum.h"
#include "core/hash.h"
#include "core/json_io.h"

namespace sp::judge {
using json = nlohmann::json;
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Result<double> number(const JsonFields& f, const json& j, std::string_view key) {
  const json& v = j.at(key);
  if (!v.is_number()) return f.error(key, fmt::format("must be a number, got {}", v.type_name()));
  const double x = v.get<double>();
  if (!std::isfinite(x)) return f.error(key, "is not finite");
  return x;
}

// A value of a diverged run (format 2): a number, or "nan", "inf", "-inf" (JSON has no NaN; the recorder writes
// them as text, python/shardproof_torch/files.py finite_or_text). Evidence of a FAIL, not a malformed record.
Result<double> evidence_number(const JsonFields& f, const json& v, std::string_view key, bool text_allowed) {
  if (v.is_number()) return v.get<double>();
  if (text_allowed && v.is_string()) {
    const std::string t = v.get<std::string>();
    if (t == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (t == "inf") return std::numeric_limits<double>::infinity();
    if (t == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return f.error(key, fmt::format("must be a number{}, got {}", text_allowed ? " (or \"nan\", \"inf\", \"-inf\")" : "",
                                  v.dump().substr(0, 40)));
}

Result<std::vector<int64_t>> int_list(const JsonFields& f, const json& j, std::string_view key, int64_t lo,
                                      int64_t hi) {
  SP_ASSIGN_OR_RETURN(const json* a, f.array(key));
  std::vector<int64_t> out;
  for (const json& v : *a) {
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
      return f.error(key, fmt::format("holds {}, not an integer in [{}, {}]", v.dump(), lo, hi));
    out.push_back(v.get<int64_t>());
  }
  return out;
}

// The record's "shard" (judge/shard.h parse_shard) against the tensor's shape, named by file, line and field.
Result<std::optional<Shard>> shard_of(const JsonFields& f, const json& j, const Shape& shape) {
  auto s = parse_shard(j.at("shard"), shape);
  if (!s.ok()) return f.error("shard", s.status().message()).with_hint(kShardHint);
  return *s;
}

Result<uint64_t> lane(const JsonFields& f, const json& v) {
  if (!v.is_string() || v.get<std::string>().size() != 16)
    return f.error("lanes", "must hold two 16-digit hex strings");
  const std::string s = v.get<std::string>();
  uint64_t x = 0;
  for (char ch : s) {
    const int d = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : -1;
    if (d < 0) return f.error("lanes", fmt::format("'{}' is not lowercase hex", s));
    x = x << 4 | static_cast<uint64_t>(d);
  }
  return x;
}

// The ExactSum words of a partial: pos | neg | sq limbs, count, NaN, Inf, absmax bits (core/exact_sum.h).
Result<std::vector<uint64_t>> exact_words(const JsonFields& f, const json& j, int64_t count) {
  std::vector<uint64_t> sum, sq;
  bool negative = false, unused = false;
  const json& vs = j.at("sum");
  const json& vq = j.at("sq");
  if (!vs.is_string() || !hex_to_limbs(vs.get<std::string>(), ExactSum::kSumLimbs, sum, negative, true))
    return f.error("sum", "must be a (signed) hex integer below 2^384 (units of 2^-149)");
  if (!vq.is_string() || !hex_to_limbs(vq.get<std::string>(), ExactSum::kSqLimbs, sq, unused, false))
    return f.error("sq", "must be a hex integer below 2^672 (units of 2^-298)");
  SP_ASSIGN_OR_RETURN(const int64_t nan, f.integer("nan", 0, count));
  SP_ASSIGN_OR_RETURN(const int64_t inf, f.integer("inf", 0, count - nan));
  SP_ASSIGN_OR_RETURN(const double absmax, number(f, j, "absmax"));
  const auto a = static_cast<float>(absmax);
  if (absmax < 0 || static_cast<double>(a) != absmax || !std::isfinite(a))
    return f.error("absmax", fmt::format("= {} is not a finite non-negative float32 value", absmax));
  std::vector<uint64_t> w(ExactSum::kWords, 0);
  for (size_t i = 0; i < sum.size(); ++i) w[(negative ? ExactSum::kSumLimbs : 0) + i] = sum[i];
  for (size_t i = 0; i < sq.size(); ++i) w[2 * ExactSum::kSumLimbs + i] = sq[i];
  const size_t tail = 2 * ExactSum::kSumLimbs + ExactSum::kSqLimbs;
  w[tail] = static_cast<uint64_t>(count);
  w[tail + 1] = static_cast<uint64_t>(nan);
  w[tail + 2] = static_cast<uint64_t>(inf);
  w[tail + 3] = std::bit_cast<uint32_t>(a);
  return w;
}

Status tensor_record(const json& j, const JsonFields& f, int rank, int64_t line, const ShapeMap& shapes,
                     RankRecords& out) {
  // The piece's identity for its replicas: its SHA-256, or (`bits`) the digest lanes of all its elements.
  const bool bits = j.contains("bits");
  SP_RETURN_IF_ERROR(f.expect_keys({"kind", "step", "phase", "tensor", "shard", "numel", "local", "cover", "lanes",
                                    "sum", "sq", "count", "nan", "inf", "absmax", bits ? "bits" : "sha256"}));
  TensorRecord t{.rank = rank, .line = line};
  SP_ASSIGN_OR_RETURN(t.step, f.integer("step", 0, kMax));
  SP_ASSIGN_OR_RETURN(t.phase, f.string("phase"));
  if (t.phase != "grad" && t.phase != "param") return f.error("phase", "must be \"grad\" or \"param\"");
  SP_ASSIGN_OR_RETURN(t.tensor, f.string("tensor"));
  SP_ASSIGN_OR_RETURN(t.numel, f.integer("numel", 1, kMax));
  // A tensor the model lacks, or of another size, is refused by the reader's completeness check, naming the model.
  const auto shape = shapes.find(t.tensor);
  if (shape != shapes.end() && shape_numel(shape->second) == t.numel) {
    SP_ASSIGN_OR_RETURN(t.shard, shard_of(f, j, shape->second));
  }
  SP_ASSIGN_OR_RETURN(t.local, f.integer("local", 0, t.numel));
  if (t.local != (t.shard ? t.shard->numel() : t.numel))
    return f.error("local", fmt::format("= {}: a {} piece of {} elements", t.local, piece_name(t.shard), t.numel));
  SP_ASSIGN_OR_RETURN(const std::vector<int64_t> cover, int_list(f, j, "cover", 0, t.local));
  if (cover.size() != 2 || cover[0] > cover[1]) return f.error("cover", "must be [k0, k1] with k0 <= k1");
  t.k0 = cover[0];
  t.k1 = cover[1];
  SP_ASSIGN_OR_RETURN(const int64_t count, f.integer("count", 0, kMax));
  if (count != t.k1 - t.k0) return f.error("count", fmt::format("= {}, but cover spans {}", count, t.k1 - t.k0));
  const json& lanes = j.at("lanes");
  if (!lanes.is_array() || lanes.size() != 2) return f.error("lanes", "must hold two 16-digit hex strings");
  SP_ASSIGN_OR_RETURN(t.lane0, lane(f, lanes[0]));
  SP_ASSIGN_OR_RETURN(t.lane1, lane(f, lanes[1]));
  SP_ASSIGN_OR_RETURN(t.exact_words, exact_words(f, j, count));
  if (bits) {
    SP_ASSIGN_OR_RETURN(t.sha256, f.string("bits"));
    if (t.sha256.size() != 32 || t.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      return f.error("bits", "must be 32 lowercase hex digits (the piece's two digest lanes)");
  } else {
    SP_ASSIGN_OR_RETURN(t.sha256, f.sha256("sha256"));
  }
  out.tensors.push_back(std::move(t));
  return Status();
}

// A step's GradScaler (recording.h ScalerRecord): its scales positive numbers, its trackers counts, found_inf a bool.
Result<ScalerRecord> scaler_record(const JsonFields& f, const json& j, const std::string& where) {
  SP_ASSIGN_OR_RETURN(const json* o, f.object("scaler"));
  const JsonFields sf(*o, where, "scaler");
  SP_RETURN_IF_ERROR(sf.expect_keys({"scale", "growth_tracker", "found_inf", "next_scale", "next_growth_tracker"}));
  ScalerRecord r;
  for (const auto& [key, out] : {std::pair{"scale", &r.scale}, std::pair{"next_scale", &r.next_scale}}) {
    const json& v = o->at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
      return sf.error(key, fmt::format("= {}: GradScaler's scale, a positive finite number", v.dump().substr(0, 40)));
    *out = v.get<double>();
  }
  SP_ASSIGN_OR_RETURN(r.tracker, sf.integer("growth_tracker", 0, kMax));
  SP_ASSIGN_OR_RETURN(r.next_tracker, sf.integer("next_growth_tracker", 0, kMax));
  if (!o->at("found_inf").is_boolean()) return sf.error("found_inf", "must be true or false");
  r.found_inf = o->at("found_inf").get<bool>();
  return r;
}

Status step_record(const json& j, const JsonFields& f, const std::string& where, int rank, int64_t line, int version,
                   RankRecords& out) {
  const bool v2 = version >= kRecordingFormatVersion;
  std::vector<std::string_view> keys = {"kind", "step", "lr", "grad_norm", "tokens", "losses"};
  if (v2) keys.push_back("group_lr");
  if (v2 && j.contains("scaler")) keys.push_back("scaler");  // fp16 with a GradScaler (the contract says whether)
  SP_RETURN_IF_ERROR(f.expect_keys(keys));
  StepRecord s{.rank = rank, .line = line};
  if (j.contains("scaler")) {
    SP_ASSIGN_OR_RETURN(s.scaler, scaler_record(f, j, where));
  }
  SP_ASSIGN_OR_RETURN(s.step, f.integer("step", 0, kMax));
  SP_ASSIGN_OR_RETURN(s.lr, evidence_number(f, j.at("lr"), "lr", v2));
  if (!j.at("grad_norm").is_null()) {
    SP_ASSIGN_OR_RETURN(const double n, evidence_number(f, j.at("grad_norm"), "grad_norm", v2));
    s.grad_norm = n;
  }
  if (v2 && !j.at("group_lr").is_null()) {
    SP_ASSIGN_OR_RETURN(const json* g, f.array("group_lr"));
    std::vector<double> lrs;
    for (const json& v : *g) {
      SP_ASSIGN_OR_RETURN(const double x, evidence_number(f, v, "group_lr", true));
      lrs.push_back(x);
    }
    s.group_lr = std::move(lrs);
    s.has_group_lr = true;
  }
  SP_ASSIGN_OR_RETURN(s.tokens, int_list(f, j, "tokens", 0, kMax));
  SP_ASSIGN_OR_RETURN(const json* losses, f.array("losses"));
  for (size_t i = 0; i < losses->size(); ++i) {
    const json& l = (*losses)[i];
    const JsonFields lf(l, where, fmt::format("losses[{}]", i));
    SP_RETURN_IF_ERROR(lf.expect_keys({"index", "targets", "loss_sum", "objective"}));
    LossRecord r;
    SP_ASSIGN_OR_RETURN(r.index, lf.integer("index", 0, kMax));
    SP_ASSIGN_OR_RETURN(r.targets, lf.integer("targets", 0, kMax));
    SP_ASSIGN_OR_RETURN(r.loss_sum, evidence_number(lf, l.at("loss_sum"), "loss_sum", v2));
    SP_ASSIGN_OR_RETURN(r.objective, evidence_number(lf, l.at("objective"), "objective", v2));
    s.losses.push_back(r);
  }
  for (const StepRecord& other : out.steps)
    if (other.step == s.step)
      return f.error("step", fmt::format("= {} is recorded twice (also line {})", s.step, other.line));
  out.steps.push_back(std::move(s));
  return Status();
}

Status state_record(const json& j, const JsonFields& f, const std::string& where, int rank, int64_t line, bool resume,
                    const ShapeMap& shapes, RankRecords& out) {
  SP_RETURN_IF_ERROR(f.expect_keys({"kind", "step", "states"}));
  StateRecord r{.rank = rank, .line = line};
  SP_ASSIGN_OR_RETURN(r.step, f.integer("step", 0, kMax));
  SP_ASSIGN_OR_RETURN(const json* states, f.array("states"));
  for (size_t i = 0; i < states->size(); ++i) {
    const json& s = (*states)[i];
    const JsonFields sf(s, where, fmt::format("states[{}]", i));
    StateDigest d;
    const bool moment = s.is_object() && s.contains("optimizer_step");
    SP_RETURN_IF_ERROR(moment ? sf.expect_keys({"tensor", "shard", "state", "sha256", "optimizer_step"})
                              : sf.expect_keys({"tensor", "shard", "state", "sha256"}));
    SP_ASSIGN_OR_RETURN(d.tensor, sf.string("tensor"));
    SP_ASSIGN_OR_RETURN(d.state, sf.string("state"));
    if (d.state != "param" && d.state != "exp_avg" && d.state != "exp_avg_sq")
      return sf.error("state", "must be param, exp_avg or exp_avg_sq");
    const auto shape = shapes.find(d.tensor);
    if (shape == shapes.end()) return sf.error("tensor", fmt::format("'{}' is not a tensor of the model", d.tensor));
    SP_ASSIGN_OR_RETURN(d.shard, shard_of(sf, s, shape->second));
    if (!s.at("sha256").is_null()) {
      SP_ASSIGN_OR_RETURN(const std::string h, sf.sha256("sha256"));
      d.sha256 = h;
    }
    if (moment) {
      SP_ASSIGN_OR_RETURN(d.optimizer_step, sf.integer("optimizer_step", 0, kMax));
    }
    r.states.push_back(std::move(d));
  }
  (resume ? out.resumes : out.saves).push_back(std::move(r));
  return Status();
}

}  // namespace

ShapeMap shape_map(const std::vector<model::WeightSpec>& weights) {
  ShapeMap out;
  for (const model::WeightSpec& w : weights) out[w.name] = w.shape;
  return out;
}

bool hex_to_limbs(std::string_view hex, size_t limbs, std::vector<uint64_t>& out, bool& negative, bool allow_sign) {
  negative = allow_sign && !hex.empty() && hex[0] == '-';
  if (negative) hex.remove_prefix(1);
  if (hex.empty() || hex.size() > 8 * limbs) return false;
  out.assign(limbs, 0);
  for (size_t i = 0; i < hex.size(); ++i) {
    const char ch = hex[hex.size() - 1 - i];
    const int d = (ch >= '0' && ch <= '9') ? ch - '0' : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10 : -1;
    if (d < 0) return false;
    out[i / 8] |= static_cast<uint64_t>(d) << (4 * (i % 8));
  }
  return true;
}

Result<std::map<std::string, std::pair<int64_t, std::string>>> parse_seal(const json& doc, const std::string& label,
                                                                          int rank) {
  const JsonFields f(doc, label, "seal");
  SP_RETURN_IF_ERROR(f.expect_keys({"format_version", "rank", "files"}));
  SP_ASSIGN_OR_RETURN(const int64_t r, f.integer("rank", 0, kMax));
  if (r != rank) return f.error("rank", fmt::format("= {}, but the file is rank {}'s", r, rank));
  SP_ASSIGN_OR_RETURN(const json* files, f.object("files"));
  std::map<std::string, std::pair<int64_t, std::string>> out;
  for (const auto& [name, entry] : files->items()) {
    if (name.empty() || name[0] == '/' || name.find("..") != std::string::npos)
      return f.error("files", fmt::format("lists '{}', not a path inside the recording", name.substr(0, 120)));
    const JsonFields ef(entry, label, "files." + name);
    SP_RETURN_IF_ERROR(ef.expect_keys({"bytes", "sha256"}));
    SP_ASSIGN_OR_RETURN(const int64_t bytes, ef.integer("bytes", 0, kMax));
    SP_ASSIGN_OR_RETURN(const std::string sha, ef.sha256("sha256"));
    out[name] = {bytes, sha};
  }
  return out;
}

Status parse_rank_record(const json& j, const std::string& where, int rank, int64_t line, int version,
                         const ShapeMap& shapes, RankRecords& out) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string())
    return corrupt("{}: a record is an object with a string \"kind\"", where);
  const JsonFields f(j, where, "record");
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "tensor") return tensor_record(j, f, rank, line, shapes, out);
  if (kind == "step") return step_record(j, f, where, rank, line, version, out);
  if (kind == "save" || kind == "resume") return state_record(j, f, where, rank, line, kind == "resume", shapes, out);
  return corrupt("{}: unknown record kind \"{}\" (tensor, step, save, resume)", where, kind.substr(0, 40));
}

}  // namespace sp::judge

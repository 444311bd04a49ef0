// The lab claims' evaluator (labs/claims.h): parse QUANTITY OP VALUE, compute the quantity from the bundle's
// files, compare. Reads only; every failure to evaluate is a claim that does not hold, with the reason.
#include "labs/claims.h"

#include <fmt/format.h>
#include <fnmatch.h>
#include <glob.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bubble.h"
#include "evidence/bundle_paths.h"

namespace sp::labs {
namespace {

using nlohmann::json;

const std::vector<std::string> kOps = {"==", "!=", "<=", ">=", "<", ">", "has", "lacks"};

std::vector<std::string> split_words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A JSON value as filters and messages show it: a string bare, a whole number (a byte sum) in full, other
// numbers to 6 significant digits, anything else as JSON text.
std::string shown(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::fabs(d) < 9.007199254740992e15 && d == std::trunc(d)) return fmt::format("{:.0f}", d);
    return fmt::format("{:.6g}", d);
  }
  return v.dump();
}

// A JSON Pointer ("/a/0/b"); a malformed one is an error, not an exception.
Result<json::json_pointer> pointer_of(const std::string& text) {
  try {
    return json::json_pointer(text);
  } catch (const json::exception& e) {
    return invalid_argument("'{}' is no JSON Pointer: {}", text, e.what());
  }
}

// A record's field: a key, or a JSON Pointer into the record when it starts with '/'; null if absent.
const json* field_of(const json& r, const std::string& field) {
  if (!r.is_object()) return nullptr;
  if (field.empty() || field[0] != '/') return r.contains(field) ? &r.at(field) : nullptr;
  Result<json::json_pointer> p = pointer_of(field);
  return p.ok() && r.contains(*p) ? &r.at(*p) : nullptr;
}

// The files GLOB names under `bundle`, sorted; an error if none, or if its file name is none of the bundle's.
Result<std::vector<std::string>> files_of(const std::string& bundle, const std::string& pattern) {
  SP_RETURN_IF_ERROR(evidence::check_bundle_name(pattern));  // every name has its home in bundle_paths.h
  glob_t g{};
  const std::string full = bundle + "/" + pattern;
  std::vector<std::string> out;
  if (::glob(full.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (out.empty()) return not_found("no file matches {}", pattern);
  std::sort(out.begin(), out.end());
  return out;
}

// Every record of the files GLOB names: the lines of a .jsonl file, the document of a .json file, or with
// GLOB#POINTER the elements of the array at that JSON Pointer of each .json document.
Result<std::vector<json>> records_of(const std::string& bundle, const std::string& glob_and_pointer) {
  const size_t hash = glob_and_pointer.find('#');
  const std::string pattern = glob_and_pointer.substr(0, hash);
  SP_ASSIGN_OR_RETURN(const std::vector<std::string> files, files_of(bundle, pattern));
  std::vector<json> out;
  for (const std::string& f : files) {
    if (f.size() > 6 && f.compare(f.size() - 6, 6, ".jsonl") == 0) {
      SP_ASSIGN_OR_RETURN(JsonlDocument d, read_jsonl_file(f, TornTail::kAllow));
      for (json& r : d.records) out.push_back(std::move(r));
    } else {
      SP_ASSIGN_OR_RETURN(json d, read_json_file(f));
      if (hash == std::string::npos) {
        out.push_back(std::move(d));
        continue;
      }
      SP_ASSIGN_OR_RETURN(const json::json_pointer p, pointer_of(glob_and_pointer.substr(hash + 1)));
      if (!d.contains(p) || !d.at(p).is_structured())
        return not_found("{} has no array or object at {}", f, p.to_string());
      if (d.at(p).is_array())
        for (json& e : d.at(p)) out.push_back(std::move(e));
      else
        for (auto& [key, e] : d.at(p).items()) {
          json r = e.is_object() ? e : json{{"value", e}};
          r["_key"] = key;  // an object's members are records with their name
          out.push_back(std::move(r));
        }
    }
  }
  return out;
}

struct Filter {
  std::string field, pattern;
  bool negate = false;  // != or !FIELD
  bool presence = false;
};

Result<Filter> parse_filter(const std::string& w) {
  Filter f;
  if (w.size() > 1 && w[0] == '!' && w.find('=') == std::string::npos) {
    f.field = w.substr(1), f.negate = true, f.presence = true;
    return f;
  }
  const size_t ne = w.find("!="), eq = w.find('=');
  if (ne != std::string::npos) {
    f.field = w.substr(0, ne), f.pattern = w.substr(ne + 2), f.negate = true;
  } else if (eq != std::string::npos && eq > 0) {
    f.field = w.substr(0, eq), f.pattern = w.substr(eq + 1);
  } else {
    return invalid_argument("'{}' is no filter (FIELD=VALUE, FIELD!=VALUE, FIELD=* or !FIELD)", w);
  }
  f.presence = f.pattern == "*";
  return f;
}

bool passes(const json& r, const std::vector<Filter>& filters) {
  for (const Filter& f : filters) {
    const json* v = field_of(r, f.field);
    const bool has = v != nullptr;
    bool match = has && (f.presence || ::fnmatch(f.pattern.c_str(), shown(*v).c_str(), 0) == 0);
    if (f.presence && !f.negate) match = has;
    if (match == f.negate) return false;
  }
  return true;
}

Result<std::vector<Filter>> filters_of(const std::vector<std::string>& words, size_t from) {
  std::vector<Filter> out;
  for (size_t i = from; i < words.size(); ++i) {
    SP_ASSIGN_OR_RETURN(Filter f, parse_filter(words[i]));
    out.push_back(std::move(f));
  }
  return out;
}

// The stage (pp rank) that idles longest at the end (or start) of a step: RUN/timeline and RUN/topology.json.
Result<json> idle_stage(const std::string& dir, bool at_end) {
  SP_ASSIGN_OR_RETURN(const evidence::RunTimelines t, evidence::read_run_timelines(dir));
  // span per (pipeline group, step): the latest end of any interval of its members.
  std::map<std::pair<int, int64_t>, int64_t> span;
  int64_t last_step = 0;
  for (size_t r = 0; r < t.timelines.size(); ++r)
    for (const evidence::TimelineInterval& i : t.timelines[r]) {
      int64_t& s = span[{t.places[r].group, i.step}];
      s = std::max(s, i.t1_us);
      last_step = std::max(last_step, i.step);
    }
  std::map<int, std::pair<double, int>> idle;  // stage → (Σ idle µs, count)
  for (size_t r = 0; r < t.timelines.size(); ++r) {
    std::map<int64_t, std::pair<int64_t, int64_t>> compute;  // step → (first start, last end)
    for (const evidence::TimelineInterval& i : t.timelines[r]) {
      if (i.kind != "forward" && i.kind != "backward") continue;
      if (last_step > 0 && i.step == 0) continue;  // step 0 is warm-up
      auto [it, fresh] = compute.emplace(i.step, std::make_pair(i.t0_us, i.t1_us));
      if (!fresh) it->second = {std::min(it->second.first, i.t0_us), std::max(it->second.second, i.t1_us)};
    }
    for (const auto& [step, c] : compute) {
      const int64_t v = at_end ? span[{t.places[r].group, step}] - c.second : c.first;
      auto& [sum, n] = idle[t.places[r].stage];
      sum += static_cast<double>(v), ++n;
    }
  }
  if (idle.empty()) return not_found("{}/timeline holds no forward or backward interval", dir);
  int best = -1;
  double best_idle = -1;
  for (const auto& [stage, s] : idle)
    if (s.first / s.second > best_idle) best = stage, best_idle = s.first / s.second;
  return json(best);
}

// `differ A B FIELD FILTER...`: records of A whose FIELD differs from B's record with the same key.
Result<json> differ(const std::string& bundle, const std::vector<std::string>& w) {
  if (w.size() < 4) return invalid_argument("differ needs two files and a field");
  SP_ASSIGN_OR_RETURN(const std::vector<json> a, records_of(bundle, w[1]));
  SP_ASSIGN_OR_RETURN(const std::vector<json> b, records_of(bundle, w[2]));
  SP_ASSIGN_OR_RETURN(const std::vector<Filter> filters, filters_of(w, 4));
  const auto key = [](const json& r) {
    json k = json::array();
    for (const char* f : {"step", "phase", "tensor"}) k.push_back(r.is_object() && r.contains(f) ? r.at(f) : json());
    return k.dump();
  };
  std::map<std::string, json> theirs;
  for (const json& r : b)
    if (passes(r, filters) && r.contains(w[3])) theirs.emplace(key(r), r.at(w[3]));
  int64_t n = 0, compared = 0;
  for (const json& r : a) {
    if (!passes(r, filters) || !r.contains(w[3])) continue;
    ++compared;
    auto it = theirs.find(key(r));
    if (it == theirs.end() || it->second != r.at(w[3])) ++n;
  }
  if (compared == 0) return not_found("no record of {} has {} under these filters", w[1], w[3]);
  return json(n);
}

// One quantity (no '/').
Result<json> quantity(const std::string& bundle, const std::vector<std::string>& w) {
  if (w.empty()) return invalid_argument("an empty quantity");
  const std::string& q = w[0];
  if (q == "count" || q == "sum" || q == "max" || q == "distinct") {
    const size_t filters_from = q == "count" ? 2 : 3;
    if (w.size() < filters_from)
      return invalid_argument("{} needs a file glob{}", q, q == "count" ? "" : " and a field");
    SP_ASSIGN_OR_RETURN(const std::vector<json> records, records_of(bundle, w[1]));
    SP_ASSIGN_OR_RETURN(const std::vector<Filter> filters, filters_of(w, filters_from));
    int64_t n = 0;
    double sum = 0, max = -INFINITY;
    std::set<std::string> values;
    for (const json& r : records) {
      if (!passes(r, filters)) continue;
      ++n;
      if (q == "count") continue;
      const json* field = field_of(r, w[2]);
      if (field == nullptr) return not_found("a record of {} has no field {}", w[1], w[2]);
      const json& v = *field;
      values.insert(v.dump());
      if (q == "distinct") continue;
      if (!v.is_number()) return invalid_argument("{} of {} is {}, not a number", w[2], w[1], v.dump());
      sum += v.get<double>(), max = std::max(max, v.get<double>());
    }
    if (q == "count") return json(n);
    if (q == "distinct") return json(static_cast<int64_t>(values.size()));
    if (n == 0) return not_found("no record of {} passes the filters", w[1]);
    return json(q == "sum" ? sum : max);
  }
  if (q == "value" && w.size() == 3) {
    SP_ASSIGN_OR_RETURN(const std::vector<std::string> files, files_of(bundle, w[1]));
    SP_ASSIGN_OR_RETURN(const json doc, read_json_file(files.front()));
    SP_ASSIGN_OR_RETURN(const json::json_pointer p, pointer_of(w[2]));
    if (!doc.contains(p)) return not_found("{} has no {}", w[1], w[2]);
    return doc.at(p);
  }
  if (q == "files" && w.size() == 2) {
    SP_ASSIGN_OR_RETURN(const std::vector<std::string> files, files_of(bundle, w[1]));
    return json(static_cast<int64_t>(files.size()));
  }
  if (q == "text" && w.size() == 2) {
    SP_ASSIGN_OR_RETURN(const std::vector<std::string> files, files_of(bundle, w[1]));
    SP_ASSIGN_OR_RETURN(std::string text, read_file(files.front()));
    return json(std::move(text));
  }
  if (q == "differ") return differ(bundle, w);
  if ((q == "idle_end_stage" || q == "idle_start_stage") && w.size() == 2)
    return idle_stage(bundle + "/" + w[1], q == "idle_end_stage");
  return invalid_argument("'{}' is no quantity of the right form (labs/claims.h lists them)", fmt::join(w, " "));
}

bool compare(const json& got, const std::string& op, const std::string& want) {
  if (op == "has" || op == "lacks") {
    const bool has = got.is_string() && got.get<std::string>().find(want) != std::string::npos;
    return has == (op == "has");
  }
  json w = json::parse(want, nullptr, false);
  if (w.is_discarded()) w = want;
  if (got.is_number() && w.is_number()) {
    const double a = got.get<double>(), b = w.get<double>();
    if (op == "==") return a == b;
    if (op == "!=") return a != b;
    if (op == "<") return a < b;
    if (op == "<=") return a <= b;
    if (op == ">") return a > b;
    return op == ">=" && a >= b;
  }
  if (op == "==") return got == w;
  if (op == "!=") return got != w;
  return false;  // ordering is for numbers only
}

// Where the operator is: the first word that is one.
size_t op_index(const std::vector<std::string>& w) {
  for (size_t i = 1; i < w.size(); ++i)
    if (std::find(kOps.begin(), kOps.end(), w[i]) != kOps.end()) return i;
  return w.size();
}

Result<json> left_side(const std::string& bundle, const std::vector<std::string>& lhs) {
  auto slash = std::find(lhs.begin(), lhs.end(), "/");
  if (slash == lhs.end()) return quantity(bundle, lhs);
  SP_ASSIGN_OR_RETURN(const json a, quantity(bundle, std::vector<std::string>(lhs.begin(), slash)));
  SP_ASSIGN_OR_RETURN(const json b, quantity(bundle, std::vector<std::string>(slash + 1, lhs.end())));
  if (!a.is_number() || !b.is_number() || b.get<double>() == 0)
    return invalid_argument("a ratio needs two numbers, the second not 0: {} / {}", a.dump(), b.dump());
  return json(a.get<double>() / b.get<double>());
}

}  // namespace

ClaimResult evaluate_claim(const std::string& bundle, const std::string& claim) {
  const std::vector<std::string> w = split_words(claim);
  const size_t op = op_index(w);
  if (op + 1 >= w.size()) return {false, "malformed claim: QUANTITY OP VALUE expected"};
  std::string want = w[op + 1];
  for (size_t i = op + 2; i < w.size(); ++i) want += " " + w[i];
  Result<json> got = left_side(bundle, std::vector<std::string>(w.begin(), w.begin() + static_cast<long>(op)));
  if (!got.ok()) return {false, got.status().message()};
  const bool holds = compare(*got, w[op], want);
  if (got->is_string() && (w[op] == "has" || w[op] == "lacks"))
    return {holds, holds == (w[op] == "has") ? "found" : "not found"};
  return {holds, shown(*got)};
}

std::string negated_claim(const std::string& claim) {
  static const std::map<std::string, std::string> kNot = {{"==", "!="},     {"!=", "=="},    {"<", ">="},
                                                          {">=", "<"},      {">", "<="},     {"<=", ">"},
                                                          {"has", "lacks"}, {"lacks", "has"}};
  std::vector<std::string> w = split_words(claim);
  const size_t op = op_index(w);
  if (op >= w.size()) return "";
  w[op] = kNot.at(w[op]);
  return fmt::format("{}", fmt::join(w, " "));
}

std::string lab_claims_text(const Lab& lab, const std::string& bundle, int& failed, int& total) {
  std::string out;
  failed = 0, total = 0;
  for (size_t i = 0; i < lab.observe.size(); ++i) {
    const Observation& o = lab.observe[i];
    std::string lines;
    bool all = true;
    for (const std::string& c : o.checks) {
      const ClaimResult r = evaluate_claim(bundle, c);
      ++total;
      if (!r.holds) ++failed, all = false;
      lines += fmt::format("      {} {}  (measured: {})\n", r.holds ? "ok  " : "FAIL", c, r.measured);
    }
    out += fmt::format("  {} {}. {}\n{}", all ? "ok  " : "FAIL", i + 1, o.text, lines);
  }
  return out;
}

}  // namespace sp::labs

#include "planner/device_rates.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/device_rates_toml.h"

namespace sp::planner {

double Curve::at(double v) const {
  if (x.empty()) return 0;
  if (v <= x.front()) return y.front();
  if (v >= x.back()) return y.back();
  const size_t i = static_cast<size_t>(std::upper_bound(x.begin(), x.end(), v) - x.begin());
  const double t = (std::log(v) - std::log(x[i - 1])) / (std::log(x[i]) - std::log(x[i - 1]));
  return std::exp(std::log(y[i - 1]) + t * (std::log(y[i]) - std::log(y[i - 1])));
}

namespace {
// The bracket of v in ascending xs, clamped: lower index and the weight of the upper one in log space.
std::pair<size_t, double> bracket(const std::vector<double>& xs, double v) {
  if (xs.size() < 2 || v <= xs.front()) return {0, 0};
  if (v >= xs.back()) return {xs.size() - 2, 1};
  const size_t i = static_cast<size_t>(std::upper_bound(xs.begin(), xs.end(), v) - xs.begin());
  return {i - 1, (std::log(v) - std::log(xs[i - 1])) / (std::log(xs[i]) - std::log(xs[i - 1]))};
}
}  // namespace

double Grid::at(double xv, double yv) const {
  if (z.empty()) return 0;
  const auto [i, t] = bracket(x, xv);
  const auto [j, u] = bracket(y, yv);
  const size_t ny = y.size(), i1 = std::min(i + 1, x.size() - 1), j1 = std::min(j + 1, ny - 1);
  auto lz = [&](size_t a, size_t b) { return std::log(z[a * ny + b]); };
  return std::exp((1 - t) * ((1 - u) * lz(i, j) + u * lz(i, j1)) + t * ((1 - u) * lz(i1, j) + u * lz(i1, j1)));
}

std::string gemm_form_name(GemmForm f) {
  switch (f) {
    case GemmForm::kForward:
      return "forward";
    case GemmForm::kDgrad:
      return "dgrad";
    case GemmForm::kWgrad:
      return "wgrad";
  }
  return "?";
}

std::string memory_family_name(MemoryFamily f) {
  switch (f) {
    case MemoryFamily::kNorm:
      return "norm";
    case MemoryFamily::kSwiglu:
      return "swiglu";
    case MemoryFamily::kRope:
      return "rope";
    case MemoryFamily::kCrossEntropy:
      return "cross_entropy";
    case MemoryFamily::kAdd:
      return "add";
    case MemoryFamily::kAdamw:
      return "adamw";
    case MemoryFamily::kCast:
      return "cast";
    case MemoryFamily::kExactSum:
      return "exact_sum";
    case MemoryFamily::kChecksum:
      return "checksum";
    case MemoryFamily::kDigest:
      return "digest";
  }
  return "?";
}

nlohmann::json DeviceRates::to_json() const {
  auto curve = [](const Curve& c) { return nlohmann::json{{"x", c.x}, {"y", c.y}}; };
  nlohmann::json j = {{"attention_head_dim", attention_head_dim}, {"notes", notes}};
  for (const auto& [d, c] : gemm_efficiency) j["gemm_efficiency"][d] = curve(c);
  for (const auto& [d, forms] : gemm_form_efficiency)
    for (const auto& [f, g] : forms)
      j["gemm_form_efficiency"][d][gemm_form_name(f)] = {{"tokens", g.x}, {"weights", g.y}, {"efficiency", g.z}};
  for (const GemmShape& g : gemm_shapes) j["gemm_shapes"].push_back({gemm_form_name(g.form), g.m, g.n, g.k});
  for (const auto& [d, e] : gemm_shape_efficiency) j["gemm_shape_efficiency"][d] = e;
  for (const auto& [d, b] : gemm_backend) j["gemm_backend"][d] = b;
  for (const auto& [d, c] : attention_forward_s) j["attention_forward_s"][d] = curve(c);
  for (const auto& [d, c] : attention_backward_s) j["attention_backward_s"][d] = curve(c);
  for (const auto& [f, c] : bandwidth) j["memory_bytes_per_s"][memory_family_name(f)] = curve(c);
  return j;
}

namespace {

std::string numbers(const std::vector<double>& v, double scale) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += fmt::format("{}{:.6g}", i ? ", " : "", v[i] * scale);
  return s + "]";
}

// Reads `key` of `t` as an array of positive numbers; an error (naming where) otherwise.
std::vector<double> read_numbers(config::TomlFields& f, const toml::table* t, const char* key, bool ascending) {
  std::vector<double> out;
  const toml::node* n = t ? t->get(key) : nullptr;
  if (!n) {
    f.error(fmt::format("{}: missing (rule: an array of numbers > 0)", f.where(key)));
    return out;
  }
  const toml::array* a = n->as_array();
  for (size_t i = 0; a && i < a->size(); ++i) {
    const auto v = (*a)[i].value<double>();
    if (!v || !(*v > 0) || !std::isfinite(*v) || (ascending && !out.empty() && *v <= out.back())) {
      f.error(fmt::format("{}: element {} must be a number > 0{}", f.where(key), i,
                          ascending ? ", larger than the one before" : ""));
      return {};
    }
    out.push_back(*v);
  }
  if (!a || out.empty()) f.error(fmt::format("{}: must be a non-empty array of numbers > 0", f.where(key)));
  return out;
}

// Every key of the sub-table `name` as a curve over `x` (y scaled by `scale`); `check` validates the key.
template <typename Put>
void read_curves(config::TomlFields& parent, const std::string& origin, std::vector<std::string>* errs,
                 const char* name, const std::vector<double>& x, double scale, Put put) {
  const toml::table* t = parent.table(name, false);
  if (!t) return;
  config::TomlFields f(t, std::string("device.measured.") + name, origin, errs);
  for (const std::string& k : f.keys()) {
    std::vector<double> y = read_numbers(f, t, k.c_str(), false);
    if (y.empty()) continue;
    if (y.size() != x.size()) {
      f.error(fmt::format("{}: {} values for {} sizes", f.where(k.c_str()), y.size(), x.size()));
      continue;
    }
    for (double& v : y) v *= scale;
    if (!put(k, Curve{x, y})) f.error(fmt::format("{}: unknown name", f.where(k.c_str())));
  }
  f.finish();
}

// gemm_shapes = [["forward", m, n, k], ...] and [device.measured.gemm_shape_efficiency] dtype = [one per shape].
void read_gemm_shapes(config::TomlFields& m, const toml::table* t, const std::string& origin,
                      std::vector<std::string>* errs, DeviceRates& out) {
  if (!t->contains("gemm_shape_efficiency")) return;
  const toml::array* shapes = t->get_as<toml::array>("gemm_shapes");
  if (!shapes) {
    m.error(fmt::format("{}: missing (rule: an array of [form, m, n, k], one per value of gemm_shape_efficiency)",
                        m.where("gemm_shapes")));
    return;
  }
  for (size_t i = 0; i < shapes->size(); ++i) {
    const toml::array* row = (*shapes)[i].as_array();
    GemmShape g;
    bool ok = row && row->size() == 4;
    if (ok) {
      const auto form = (*row)[0].value<std::string>();
      const auto at = std::find_if(std::begin(kGemmForms), std::end(kGemmForms),
                                   [&](GemmForm f) { return form && gemm_form_name(f) == *form; });
      ok = at != std::end(kGemmForms);
      if (ok) g.form = *at;
      double* dims[] = {&g.m, &g.n, &g.k};
      for (size_t d = 0; ok && d < 3; ++d) {
        const auto v = (*row)[d + 1].value<double>();
        ok = v && *v >= 1 && *v <= 1e12 && std::isfinite(*v);
        if (ok) *dims[d] = *v;
      }
    }
    if (!ok) {
      m.error(
          fmt::format("{}: element {} must be [\"forward\" | \"dgrad\" | \"wgrad\", m, n, k] with sizes in [1, 1e12]",
                      m.where("gemm_shapes"), i));
      return;
    }
    out.gemm_shapes.push_back(g);
  }
  const std::vector<double> cells(out.gemm_shapes.size(), 1.0);
  read_curves(m, origin, errs, "gemm_shape_efficiency", cells, 1.0, [&](const std::string& k, Curve c) {
    for (double e : c.y)
      if (e > 1) return false;
    out.gemm_shape_efficiency[k] = std::move(c.y);
    return true;
  });
}

}  // namespace

void read_device_rates(config::TomlFields& device, const std::string& origin, std::vector<std::string>* errs,
                       DeviceRates& out) {
  const toml::table* t = device.table("measured", false);
  if (!t) return;
  config::TomlFields m(t, "device.measured", origin, errs);
  // The arrays are read from the table directly: every key is marked read here and checked against the list.
  static const std::vector<std::string> kKnown = {"notes",
                                                  "gemm_flops",
                                                  "attention_seq",
                                                  "attention_head_dim",
                                                  "gemm_efficiency",
                                                  "gemm_backend",
                                                  "attention_forward_us",
                                                  "attention_backward_us",
                                                  "memory_bytes",
                                                  "memory_gbytes_per_s",
                                                  "gemm_tokens",
                                                  "gemm_weights",
                                                  "gemm_forward_efficiency",
                                                  "gemm_dgrad_efficiency",
                                                  "gemm_wgrad_efficiency",
                                                  "gemm_shapes",
                                                  "gemm_shape_efficiency"};
  for (const std::string& k : m.keys())
    if (std::find(kKnown.begin(), kKnown.end(), k) == kKnown.end())
      m.error(fmt::format("{}: unknown key in [device.measured]", m.where(k.c_str())));
  const std::vector<double> flops =
      t->contains("gemm_efficiency") ? read_numbers(m, t, "gemm_flops", true) : std::vector<double>{};
  const std::vector<double> seq = t->contains("attention_forward_us") || t->contains("attention_backward_us")
                                      ? read_numbers(m, t, "attention_seq", true)
                                      : std::vector<double>{};
  if (t->contains("attention_head_dim")) {
    if (auto d = (*t)["attention_head_dim"].value<int64_t>(); d && *d >= 1 && *d <= (1 << 16))
      out.attention_head_dim = *d;
    else
      m.error(fmt::format("{}: must be an integer in [1, 65536]", m.where("attention_head_dim")));
  }
  if (const toml::array* notes = t->get_as<toml::array>("notes"))
    for (const auto& n : *notes)
      if (auto v = n.value<std::string>()) out.notes.push_back(*v);
  read_curves(m, origin, errs, "gemm_efficiency", flops, 1.0, [&](const std::string& k, Curve c) {
    for (double e : c.y)
      if (e > 1) return false;
    out.gemm_efficiency[k] = std::move(c);
    return true;
  });
  // Per form: a grid over gemm_tokens × gemm_weights, tokens-major.
  std::vector<double> tokens, weights;
  for (GemmForm form : kGemmForms) {
    const std::string name = "gemm_" + gemm_form_name(form) + "_efficiency";
    if (!t->contains(name)) continue;
    if (tokens.empty()) {
      tokens = read_numbers(m, t, "gemm_tokens", true);
      weights = read_numbers(m, t, "gemm_weights", true);
    }
    const std::vector<double> cells(tokens.size() * weights.size(), 1.0);
    read_curves(m, origin, errs, name.c_str(), cells, 1.0, [&](const std::string& k, Curve c) {
      for (double e : c.y)
        if (e > 1) return false;
      out.gemm_form_efficiency[k][form] = Grid{tokens, weights, std::move(c.y)};
      return true;
    });
  }
  read_gemm_shapes(m, t, origin, errs, out);
  if (const toml::table* b = m.table("gemm_backend", false)) {
    config::TomlFields f(b, "device.measured.gemm_backend", origin, errs);
    for (const std::string& k : f.keys())
      if (auto v = (*b)[k].value<std::string>()) out.gemm_backend[k] = *v;
    f.finish();
  }
  read_curves(m, origin, errs, "attention_forward_us", seq, 1e-6, [&](const std::string& k, Curve c) {
    out.attention_forward_s[k] = std::move(c);
    return true;
  });
  read_curves(m, origin, errs, "attention_backward_us", seq, 1e-6, [&](const std::string& k, Curve c) {
    out.attention_backward_s[k] = std::move(c);
    return true;
  });
  // Per family: the bytes of each measured call (ascending) and the bandwidth reached.
  std::map<std::string, std::vector<double>> bytes;
  if (const toml::table* b = m.table("memory_bytes", false)) {
    config::TomlFields f(b, "device.measured.memory_bytes", origin, errs);
    for (const std::string& k : f.keys()) bytes[k] = read_numbers(f, b, k.c_str(), true);
    f.finish();
  }
  if (const toml::table* g = m.table("memory_gbytes_per_s", false)) {
    config::TomlFields f(g, "device.measured.memory_gbytes_per_s", origin, errs);
    for (const std::string& k : f.keys()) {
      std::vector<double> y = read_numbers(f, g, k.c_str(), false);
      const auto x = bytes.find(k);
      const auto family = std::find_if(std::begin(kMemoryFamilies), std::end(kMemoryFamilies),
                                       [&](MemoryFamily fam) { return memory_family_name(fam) == k; });
      if (family == std::end(kMemoryFamilies)) {
        f.error(
            fmt::format("{}: unknown family (known: norm, swiglu, rope, cross_entropy, add, adamw, cast, exact_sum, "
                        "checksum, digest)",
                        f.where(k.c_str())));
      } else if (x == bytes.end() || x->second.size() != y.size()) {
        f.error(fmt::format("{}: needs device.measured.memory_bytes.{} with as many sizes", f.where(k.c_str()), k));
      } else if (!y.empty()) {
        for (double& v : y) v *= 1e9;
        out.bandwidth[*family] = Curve{x->second, y};
      }
    }
    f.finish();
  }
  m.finish();
}

std::string device_rates_to_toml(const DeviceRates& r) {
  if (r.empty()) return "";
  std::vector<double> flops, seq;
  if (!r.gemm_efficiency.empty()) flops = r.gemm_efficiency.begin()->second.x;
  if (!r.attention_forward_s.empty()) seq = r.attention_forward_s.begin()->second.x;
  std::string t = "\n[device.measured]\n";
  if (!r.notes.empty()) {
    t += "notes = [\n";
    for (const auto& n : r.notes) t += fmt::format("  \"{}\",\n", n);
    t += "]\n";
  }
  if (!flops.empty()) t += fmt::format("gemm_flops = {}\n", numbers(flops, 1));
  const Grid* grid = nullptr;
  for (const auto& [d, forms] : r.gemm_form_efficiency)
    if (!forms.empty()) grid = &forms.begin()->second;
  if (grid) t += fmt::format("gemm_tokens = {}\ngemm_weights = {}\n", numbers(grid->x, 1), numbers(grid->y, 1));
  if (!r.gemm_shapes.empty()) {
    t += "gemm_shapes = [\n";
    for (const GemmShape& g : r.gemm_shapes)
      t += fmt::format("  [\"{}\", {:.0f}, {:.0f}, {:.0f}],\n", gemm_form_name(g.form), g.m, g.n, g.k);
    t += "]\n";
  }
  if (!seq.empty())
    t += fmt::format("attention_seq = {}\nattention_head_dim = {}\n", numbers(seq, 1), r.attention_head_dim);
  auto table = [&](const char* name, const auto& curves, double scale, auto key_name) {
    if (curves.empty()) return;
    t += fmt::format("\n[device.measured.{}]\n", name);
    for (const auto& [k, c] : curves) t += fmt::format("{} = {}\n", key_name(k), numbers(c.y, scale));
  };
  auto same = [](const std::string& k) { return k; };
  table("gemm_efficiency", r.gemm_efficiency, 1.0, same);
  for (GemmForm form : kGemmForms) {
    std::map<std::string, Curve> cells;  // as curves, for `table`
    for (const auto& [d, forms] : r.gemm_form_efficiency)
      if (auto g = forms.find(form); g != forms.end()) cells[d] = Curve{{}, g->second.z};
    table(("gemm_" + gemm_form_name(form) + "_efficiency").c_str(), cells, 1.0, same);
  }
  if (!r.gemm_shape_efficiency.empty()) {
    t += "\n# a model's own GEMM calls (plan calibrate --model): [form, m, n, k], C (m, n) = A (m, k) B (k, n)\n";
    t += "[device.measured.gemm_shape_efficiency]\n";
    for (const auto& [d, e] : r.gemm_shape_efficiency) t += fmt::format("{} = {}\n", d, numbers(e, 1));
  }
  if (!r.gemm_backend.empty()) {
    t += "\n[device.measured.gemm_backend]\n";
    for (const auto& [k, b] : r.gemm_backend) t += fmt::format("{} = \"{}\"\n", k, b);
  }
  table("attention_forward_us", r.attention_forward_s, 1e6, same);
  table("attention_backward_us", r.attention_backward_s, 1e6, same);
  if (!r.bandwidth.empty()) {
    t += "\n[device.measured.memory_bytes]\n";
    for (const auto& [f, c] : r.bandwidth) t += fmt::format("{} = {}\n", memory_family_name(f), numbers(c.x, 1));
  }
  table("memory_gbytes_per_s", r.bandwidth, 1e-9, [](MemoryFamily f) { return memory_family_name(f); });
  return t;
}

}  // namespace sp::planner

#include "ckpt/hf_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include "ckpt/names.h"

namespace sp::ckpt {

std::string hf_shard_file_name(int index, int count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count);
}

Result<uint64_t> parse_shard_size(std::string_view text) {
  static const std::vector<std::pair<std::string_view, double>> kUnits = {
      {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
      {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
      {"b", 1.0}};
  std::string s;
  for (char c : text)
    if (c != ' ') s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  auto bad = [&] {
    return invalid_argument("--max-shard-size '{}' is not a size", text)
        .with_hint("bytes, or a number with KB, MB, GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2): 5GB");
  };
  double multiplier = 1.0;
  for (const auto& [unit, m] : kUnits)
    if (s.size() > unit.size() && s.ends_with(unit)) {
      multiplier = m;
      s.resize(s.size() - unit.size());
      break;
    }
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string::npos) return bad();
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return bad();
  const double bytes = std::floor(value * multiplier);
  if (!(bytes >= 1.0) || bytes > 1e18)
    return invalid_argument("--max-shard-size '{}' must be at least 1 byte and at most 10^18", text);
  return static_cast<uint64_t>(bytes);
}

std::vector<std::string> HfIndex::files() const {
  std::set<std::string> f;
  for (const auto& [tensor, file] : weight_map) f.insert(file);
  return {f.begin(), f.end()};
}

Result<HfIndex> parse_hf_index(const nlohmann::json& j, const std::string& label) {
  auto bad = [&](const std::string& what) {
    return invalid_argument("{}: {}", label, what)
        .with_hint(
            "a model.safetensors.index.json is {\"metadata\": {\"total_size\": BYTES}, \"weight_map\": "
            "{TENSOR: FILE, ...}} (docs/formats/huggingface.md)");
  };
  if (!j.is_object()) return bad(fmt::format("the index must be a JSON object, got {}", j.type_name()));
  for (const auto& [key, value] : j.items())
    if (key != "weight_map" && key != "metadata") return bad(fmt::format("unknown key {:?}", key));
  HfIndex index;
  if (j.contains("metadata")) {
    const nlohmann::json& m = j.at("metadata");
    if (!m.is_object()) return bad(fmt::format("\"metadata\" must be an object, got {}", m.dump()));
    index.metadata = m;
    if (m.contains("total_size")) {
      const nlohmann::json& t = m.at("total_size");
      if (!t.is_number_unsigned() && !(t.is_number_integer() && t.get<int64_t>() >= 0))
        return bad(fmt::format("\"metadata.total_size\" = {} must be a non-negative integer (bytes)", t.dump()));
      index.total_size = t.get<uint64_t>();
    }
  }
  if (!j.contains("weight_map")) return bad("missing key \"weight_map\"");
  const nlohmann::json& w = j.at("weight_map");
  if (!w.is_object() || w.empty())
    return bad(
        fmt::format("\"weight_map\" must be a non-empty object of tensor name → file, got {}", w.dump().substr(0, 60)));
  for (const auto& [tensor, file] : w.items()) {
    if (!file.is_string())
      return bad(fmt::format("weight_map[\"{}\"] = {} must be a file name (string)", tensor, file.dump()));
    const std::string f = file.get<std::string>();
    if (Status s = check_path_component(f, fmt::format("weight_map[\"{}\"]", tensor)); !s.ok())
      return bad(s.message() + " (shards lie in the index's own directory)");
    index.weight_map.emplace(tensor, f);
  }
  return index;
}

std::string hf_index_text(const HfIndex& index) {
  nlohmann::json metadata = index.metadata;
  if (index.total_size) metadata["total_size"] = *index.total_size;
  nlohmann::json j = {{"metadata", metadata}, {"weight_map", index.weight_map}};
  return j.dump(2) + "\n";
}

std::vector<std::vector<size_t>> plan_hf_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_shard_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensor_bytes.size(); ++i) {
    const uint64_t b = tensor_bytes[i];
    if (b > max_shard_bytes) {  // alone, in a shard of its own, listed when it is met
      shards.push_back({i});
      continue;
    }
    if (current_bytes + b > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += b;
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

}  // namespace sp::ckpt

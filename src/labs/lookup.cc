// Finding a lab and its variations in a loaded catalogue, and the lab a variation makes (labs/catalogue.h);
// reading the catalogue file is catalogue.cc.
#include <algorithm>
#include <cctype>

#include "labs/catalogue.h"

namespace sp::labs {

Result<const Lab*> LabCatalogue::find(std::string_view key) const {
  std::string k;
  for (char c : key) k += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (k.size() == 1) k = "LSL-" + k;
  std::string keys;
  for (const Lab& lab : labs) {
    if (lab.key == k) return &lab;
    keys += (keys.empty() ? "" : ", ") + lab.key;
  }
  return not_found("no lab '{}'", key).with_hint("the labs are " + keys + " (`shardproof lab list`)");
}

Result<const Variation*> Lab::find_variation(std::string_view name) const {
  std::string names;
  for (const Variation& v : variations) {
    if (v.name == name) return &v;
    names += (names.empty() ? "" : ", ") + v.name;
  }
  return not_found("lab {} has no variation '{}'", key, name)
      .with_hint(names.empty() ? "this lab has no variations" : "its variations are " + names);
}

const Variation* Lab::variation_of_sets(const std::vector<std::string>& given) const {
  std::vector<std::string> a = given;
  std::sort(a.begin(), a.end());
  for (const Variation& v : variations) {
    std::vector<std::string> b = v.sets;
    std::sort(b.begin(), b.end());
    if (a == b) return &v;
  }
  return nullptr;
}

Lab lab_variation(const Lab& lab, const Variation& v) {
  Lab out = lab;
  out.sets.insert(out.sets.end(), v.sets.begin(), v.sets.end());
  if (v.world > 0) out.world = v.world;
  if (!v.fault.empty()) out.fault = v.fault;
  out.observe = v.observe;
  out.variations.clear();
  out.variation = v.name;
  return out;
}

}  // namespace sp::labs

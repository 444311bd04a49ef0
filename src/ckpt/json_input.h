// Strict JSON input for checkpoint files (manifest, LATEST, shard fragment metadata): bounded
// nesting, no duplicate keys, typed field access whose errors name the file and the key.
// Not a schema language: manifest.cc and shard.cc say which keys exist; this only reads them.
// Invariant: a document that parses here can be dumped and walked without recursion deeper than
// kMaxJsonDepth, and every accessor either returns a value of the asked type and range or a
// Status naming `label` and the dotted key path.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace sp::ckpt {

// Parses `text`; refuses nesting deeper than `max_depth`, duplicate object keys, and trailing bytes.
Result<nlohmann::json> parse_json_strict(std::string_view text, const std::string& label, int max_depth);

// Field readers over one object. `where` is the dotted path of the object ("manifest.topology").
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string label, std::string where)
      : j_(object), label_(std::move(label)), where_(std::move(where)) {}
  // The object has exactly these keys (no more, no fewer).
  Status expect_keys(std::initializer_list<std::string_view> keys) const;
  Result<int64_t> integer(std::string_view key, int64_t lo, int64_t hi) const;
  Result<std::string> string(std::string_view key) const;
  Result<const nlohmann::json*> object(std::string_view key) const;
  Result<const nlohmann::json*> array(std::string_view key) const;
  // A lowercase hex SHA-256 (64 digits).
  Result<std::string> sha256(std::string_view key) const;
  Status error(std::string_view key, std::string_view what) const;  // corrupt("<label>: <where>.<key> <what>")

 private:
  const nlohmann::json& j_;
  std::string label_, where_;
};

bool is_sha256_hex(std::string_view s);

}  // namespace sp::ckpt

// Strict JSON and JSON Lines input and checked JSON Lines output: the one way every evidence file,
// manifest and bundle document is read or appended (docs/formats/). Readers bound what they allocate
// (a size limit per file), refuse nesting deeper than kMaxJsonDepth, duplicate object keys and
// trailing bytes, and name the file (and line) in every error. JsonFields reads typed fields whose
// errors name the file and the dotted key path. JsonlWriter writes whole lines and checks every
// write, flush and close: an error is kept and returned, never dropped.
// Not a schema language: the module that owns a format says which keys exist.
// Invariant: a document that parses here can be dumped and walked without recursion deeper than
// kMaxJsonDepth; a line reaches the file whole or, after a crash, as a torn last line that readers
// recognise (TornTail::kAllow) instead of a silently shortened record.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{1} << 30;  // 1 GiB: bounded allocation on untrusted input

// Parses `text`; refuses nesting deeper than `max_depth`, duplicate object keys, and trailing bytes.
// A key (or any name read from a file) as a message shows it: as it is when every byte is printable, else quoted
// with its invisible bytes escaped ("train_batch_size\x00"), so two keys that look alike are told apart.
std::string shown_key(std::string_view key);

Result<nlohmann::json> parse_json_strict(std::string_view text, const std::string& label,
                                         int max_depth = kMaxJsonDepth);
// The whole file at `path` (at most `max_bytes`), parsed strictly; errors name the path.
Result<nlohmann::json> read_json_file(const std::string& path, uint64_t max_bytes = kMaxJsonFileBytes);

// JSON Lines: one JSON object per '\n'-terminated line; empty lines are skipped.
// kAllow: a last line without its '\n' that does not parse is a torn tail (a crash mid-write): it is
// dropped and its size reported. kRefuse: it is an error like any other bad line.
enum class TornTail { kRefuse, kAllow };
struct JsonlDocument {
  std::vector<nlohmann::json> records;  // every complete record, in file order
  std::vector<int64_t> line_numbers;    // 1-based line of each record
  int64_t torn_bytes = 0;               // size of a dropped torn tail (kAllow), else 0
};
Result<JsonlDocument> parse_jsonl(std::string_view text, const std::string& label, TornTail torn = TornTail::kRefuse);
Result<JsonlDocument> read_jsonl_file(const std::string& path, TornTail torn = TornTail::kRefuse,
                                      uint64_t max_bytes = kMaxJsonFileBytes);

// What input() accepts beyond the strict types.
struct JsonInputRules {
  bool whole_floats_are_integers = false;  // 5e8 reads as 500000000 (DeepSpeed's pydantic coerces so)
};

// Field readers over one object. `where` is the dotted path of the object ("manifest.topology"). Two contracts:
//  - a file this program wrote (manifests, evidence): the constructor; every key required, the first problem
//    returned as kCorrupt "<label>: <where>.<key> <what>".
//  - input a person wrote (a run configuration, a ds_config): input(); every key optional (absent: nullopt, the
//    caller's default stands), every problem kept in problems() as kInvalidArgument "<where>.<key> = <value>
//    must be <rule>", and the keys no reader asked for refused by refuse_unread() naming the keys that exist.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string label, std::string where)
      : j_(object), label_(std::move(label)), where_(std::move(where)) {}
  // `where` is the object's dotted path, "" for the top level; an `object` that is not one is a problem.
  static JsonFields input(const nlohmann::json& object, std::string where, JsonInputRules rules = {});
  // The object has exactly these keys (no more, no fewer).
  Status expect_keys(std::initializer_list<std::string_view> keys) const;
  Status expect_keys(std::span<const std::string_view> keys) const;
  Result<int64_t> integer(std::string_view key, int64_t lo, int64_t hi) const;
  Result<std::string> string(std::string_view key) const;
  Result<const nlohmann::json*> object(std::string_view key) const;
  Result<const nlohmann::json*> array(std::string_view key) const;
  // A lowercase hex SHA-256 (64 digits).
  Result<std::string> sha256(std::string_view key) const;
  Status error(std::string_view key, std::string_view what) const;  // corrupt("<label>: <where>.<key> <what>")

  // Input readers: nullopt (or null) when the key is absent, or present and refused (then a problem is kept).
  std::optional<int64_t> read_integer(std::string_view key, int64_t lo, int64_t hi);
  std::optional<double> read_number(std::string_view key, double lo, double hi);
  std::optional<bool> read_boolean(std::string_view key);
  std::optional<std::string> read_string(std::string_view key);
  std::optional<std::string> read_choice(std::string_view key, const std::vector<std::string>& names);
  const nlohmann::json* read_object(std::string_view key);
  // Keeps "unknown key <where>.<k>" for every key no read_* asked for (refuse_unread) or not in `known`
  // (refuse_unknown); `why` follows in parentheses, and the hint lists the keys that exist.
  void refuse_unread(std::string_view why = {});
  void refuse_unknown(const std::vector<std::string>& known, std::string_view why = {});
  const std::vector<Status>& problems() const { return problems_; }
  Status first_problem() const { return problems_.empty() ? Status() : problems_.front(); }
  std::string path(std::string_view key) const;  // "<where>.<key>", or "<key>" at the top level

 private:
  const nlohmann::json* take(std::string_view key);
  void refuse(std::string_view key, const nlohmann::json& value, std::string_view rule);
  const nlohmann::json& j_;
  std::string label_, where_;
  bool input_ = false;
  JsonInputRules rules_;
  std::vector<std::string> read_;
  std::vector<Status> problems_;
};

bool is_sha256_hex(std::string_view s);

// A JSON Lines file written a whole line at a time. Lines are buffered and handed to the kernel by
// flush() (one write(2) for what fits, retried until complete), so a process crash leaves a valid
// prefix. The first error of any write, flush or close is kept: later writes are dropped and every
// flush()/close() returns it, naming the file. A write that fails part-way (a full disk) is cut back
// to the last whole line, so the file never ends in half a record. The destructor closes without
// reporting; call close() where the outcome matters.
class JsonlWriter {
 public:
  enum class Mode { kTruncate, kAppend };
  static Result<JsonlWriter> open(const std::string& path, Mode mode);
  JsonlWriter(JsonlWriter&& o) noexcept;
  JsonlWriter& operator=(JsonlWriter&& o) noexcept;
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  ~JsonlWriter();

  void write(const nlohmann::json& record);  // record.dump() + '\n'
  void write_line(std::string_view line);    // a complete line; a missing '\n' is added
  Status flush();
  Status sync();   // flush, then fsync(2): durable against a machine crash
  Status close();  // flush and close; the writer is then empty
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }
  int64_t lines() const { return lines_; }

 private:
  JsonlWriter(int fd, std::string path, int64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
  int fd_ = -1;
  std::string path_;
  int64_t size_ = 0;  // bytes of whole lines in the file
  std::string buffer_;
  int64_t lines_ = 0;
  Status status_;
};

}  // namespace sp

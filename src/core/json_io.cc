#include "core/json_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "core/file_io.h"

namespace sp {
namespace {

// First pass: structure only. Depth counts open objects and arrays; each object remembers its keys.
class GuardSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  GuardSax(const std::string& label, int max_depth) : label_(label), max_depth_(max_depth) {}
  Status status;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    is_object_.push_back(true);
    return deeper();
  }
  bool end_object() override {
    keys_.pop_back();
    is_object_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    is_object_.push_back(false);
    return deeper();
  }
  bool end_array() override {
    is_object_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!keys_.back().insert(k).second) {
      status = corrupt("{}: key {:?} appears twice in one object", label_, k.substr(0, 120));
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    status = corrupt("{}: not valid JSON at byte {}: {}", label_, position, std::string(e.what()).substr(0, 200));
    return false;
  }

 private:
  bool deeper() {
    if (static_cast<int>(is_object_.size()) <= max_depth_) return true;
    status = corrupt("{}: JSON nested deeper than {} levels", label_, max_depth_);
    return false;
  }
  const std::string& label_;
  int max_depth_;
  std::vector<std::set<std::string>> keys_;
  std::vector<bool> is_object_;
};

}  // namespace

std::string shown_key(std::string_view key) {
  const bool printable = std::all_of(key.begin(), key.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u != 0x7f;
  });
  return printable ? std::string(key) : fmt::format("{:?}", key);
}

Result<nlohmann::json> parse_json_strict(std::string_view text, const std::string& label, int max_depth) {
  GuardSax guard(label, max_depth);
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(text.begin(), text.end(), &guard);
  } catch (const std::exception& e) {
    return corrupt("{}: not valid JSON: {}", label, std::string(e.what()).substr(0, 200));
  }
  if (!guard.status.ok()) return guard.status;
  if (!ok) return corrupt("{}: not valid JSON", label);
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt("{}: not valid JSON", label);
  return j;
}

bool is_sha256_hex(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

Status JsonFields::error(std::string_view key, std::string_view what) const {
  return corrupt("{}: {}.{} {}", label_, where_, key, what);
}

Status JsonFields::expect_keys(std::initializer_list<std::string_view> keys) const {
  return expect_keys(std::span<const std::string_view>(keys.begin(), keys.size()));
}

Status JsonFields::expect_keys(std::span<const std::string_view> keys) const {
  if (!j_.is_object()) return corrupt("{}: {} must be an object, got {}", label_, where_, j_.type_name());
  for (std::string_view k : keys)
    if (!j_.contains(k)) return error(k, "is missing");
  for (const auto& [k, v] : j_.items()) {
    bool known = false;
    for (std::string_view want : keys) known = known || k == want;
    if (!known) return corrupt("{}: {} has an unknown key {:?}", label_, where_, k.substr(0, 120));
  }
  return Status();
}

Result<int64_t> JsonFields::integer(std::string_view key, int64_t lo, int64_t hi) const {
  const nlohmann::json& v = j_.at(key);
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return error(key, fmt::format("= {} is out of range [{}, {}]", u, lo, hi));
    const auto x = static_cast<int64_t>(u);
    if (x < lo) return error(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
    return x;
  }
  if (!v.is_number_integer()) return error(key, fmt::format("must be an integer, got {}", v.type_name()));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return error(key, fmt::format("= {} is out of range [{}, {}]", x, lo, hi));
  return x;
}

Result<std::string> JsonFields::string(std::string_view key) const {
  const nlohmann::json& v = j_.at(key);
  if (!v.is_string()) return error(key, fmt::format("must be a string, got {}", v.type_name()));
  return v.get<std::string>();
}

Result<const nlohmann::json*> JsonFields::object(std::string_view key) const {
  const nlohmann::json& v = j_.at(key);
  if (!v.is_object()) return error(key, fmt::format("must be an object, got {}", v.type_name()));
  return &v;
}

Result<const nlohmann::json*> JsonFields::array(std::string_view key) const {
  const nlohmann::json& v = j_.at(key);
  if (!v.is_array()) return error(key, fmt::format("must be an array, got {}", v.type_name()));
  return &v;
}

JsonFields JsonFields::input(const nlohmann::json& object, std::string where, JsonInputRules rules) {
  JsonFields f(object, "", std::move(where));
  f.input_ = true;
  f.rules_ = rules;
  if (!object.is_object())
    f.problems_.push_back(invalid_argument("{} = {} must be an object", f.where_.empty() ? "the top level" : f.where_,
                                           object.dump().substr(0, 60)));
  return f;
}

std::string JsonFields::path(std::string_view key) const {
  return where_.empty() ? std::string(key) : fmt::format("{}.{}", where_, key);
}

const nlohmann::json* JsonFields::take(std::string_view key) {
  read_.emplace_back(key);
  if (!j_.is_object()) return nullptr;
  const auto it = j_.find(key);
  return it == j_.end() ? nullptr : &*it;
}

void JsonFields::refuse(std::string_view key, const nlohmann::json& value, std::string_view rule) {
  problems_.push_back(invalid_argument("{} = {} {}", path(key), value.dump().substr(0, 60), rule));
}

std::optional<int64_t> JsonFields::read_integer(std::string_view key, int64_t lo, int64_t hi) {
  const nlohmann::json* v = take(key);
  if (v == nullptr) return std::nullopt;
  if (rules_.whole_floats_are_integers && v->is_number_float()) {
    const double d = v->get<double>();
    if (std::floor(d) == d && std::abs(d) < 9e15) {
      const auto x = static_cast<int64_t>(d);
      if (x >= lo && x <= hi) return x;
    }
  }
  if (!v->is_number_integer()) {
    refuse(key, *v, fmt::format("must be an integer in [{}, {}]", lo, hi));
    return std::nullopt;
  }
  const bool big = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX);
  const int64_t x = big ? INT64_MAX : v->get<int64_t>();
  if (big || x < lo || x > hi) {
    refuse(key, *v, fmt::format("is out of range [{}, {}]", lo, hi));
    return std::nullopt;
  }
  return x;
}

std::optional<double> JsonFields::read_number(std::string_view key, double lo, double hi) {
  const nlohmann::json* v = take(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    refuse(key, *v, fmt::format("must be a number in [{}, {}]", lo, hi));
    return std::nullopt;
  }
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    refuse(key, *v, fmt::format("is out of range [{}, {}]", lo, hi));
    return std::nullopt;
  }
  return x;
}

std::optional<bool> JsonFields::read_boolean(std::string_view key) {
  const nlohmann::json* v = take(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    refuse(key, *v, "must be true or false");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> JsonFields::read_string(std::string_view key) {
  const nlohmann::json* v = take(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    refuse(key, *v, "must be a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::string> JsonFields::read_choice(std::string_view key, const std::vector<std::string>& names) {
  std::optional<std::string> s = read_string(key);
  if (!s || std::find(names.begin(), names.end(), *s) != names.end()) return s;
  refuse(key, *j_.find(key), fmt::format("is not one of: {}", fmt::join(names, ", ")));
  return std::nullopt;
}

const nlohmann::json* JsonFields::read_object(std::string_view key) {
  const nlohmann::json* v = take(key);
  if (v == nullptr || v->is_object()) return v;
  refuse(key, *v, "must be an object");
  return nullptr;
}

void JsonFields::refuse_unknown(const std::vector<std::string>& known, std::string_view why) {
  if (!j_.is_object()) return;
  for (const auto& [k, v] : j_.items()) {
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    std::vector<std::string> listed;
    for (const std::string& n : known)
      if (std::find(listed.begin(), listed.end(), n) == listed.end()) listed.push_back(n);
    problems_.push_back(
        invalid_argument("unknown key {}{}", path(shown_key(k)),
                         why.empty() ? std::string() : fmt::format(" ({})", why))
            .with_hint(fmt::format("known keys {}: {}", where_.empty() ? "at the top level" : "in [" + where_ + "]",
                                   fmt::join(listed, ", "))));
  }
}

void JsonFields::refuse_unread(std::string_view why) { refuse_unknown(read_, why); }

Result<std::string> JsonFields::sha256(std::string_view key) const {
  SP_ASSIGN_OR_RETURN(std::string s, string(key));
  if (!is_sha256_hex(s)) return error(key, fmt::format("= {:?} is not a lowercase hex SHA-256", s.substr(0, 80)));
  return s;
}

Result<nlohmann::json> read_json_file(const std::string& path, uint64_t max_bytes) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(path, max_bytes));
  return parse_json_strict(text, "'" + path + "'");
}

Result<JsonlDocument> parse_jsonl(std::string_view text, const std::string& label, TornTail torn) {
  JsonlDocument out;
  size_t pos = 0;
  for (int64_t line_no = 1; pos < text.size(); ++line_no) {
    const size_t eol = text.find('\n', pos);
    const bool complete = eol != std::string_view::npos;
    const std::string_view line = text.substr(pos, complete ? eol - pos : std::string_view::npos);
    pos = complete ? eol + 1 : text.size();
    if (line.empty()) continue;
    auto j = parse_json_strict(line, fmt::format("{}:{}", label, line_no));
    if (!j.ok() && !complete && torn == TornTail::kAllow) {
      out.torn_bytes = static_cast<int64_t>(line.size());
      break;
    }
    if (!j.ok()) return j.status();
    if (!j->is_object()) return corrupt("{}:{}: not a JSON object", label, line_no);
    out.records.push_back(std::move(j).value());
    out.line_numbers.push_back(line_no);
  }
  return out;
}

Result<JsonlDocument> read_jsonl_file(const std::string& path, TornTail torn, uint64_t max_bytes) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(path, max_bytes));
  return parse_jsonl(text, path, torn);
}

// ---------------------------------------------------------------------------------------------
// JsonlWriter

Result<JsonlWriter> JsonlWriter::open(const std::string& path, Mode mode) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_APPEND | (mode == Mode::kTruncate ? O_TRUNC : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return io_error("cannot open '{}' for writing: {}", path, std::strerror(errno));
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0) {
    const int err = errno;
    ::close(fd);
    return io_error("cannot seek in '{}': {}", path, std::strerror(err));
  }
  return JsonlWriter(fd, path, static_cast<int64_t>(size));
}

JsonlWriter::JsonlWriter(JsonlWriter&& o) noexcept
    : fd_(o.fd_),
      path_(std::move(o.path_)),
      size_(o.size_),
      buffer_(std::move(o.buffer_)),
      lines_(o.lines_),
      status_(o.status_) {
  o.fd_ = -1;
}

JsonlWriter& JsonlWriter::operator=(JsonlWriter&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    size_ = o.size_;
    buffer_ = std::move(o.buffer_);
    lines_ = o.lines_;
    status_ = o.status_;
    o.fd_ = -1;
  }
  return *this;
}

JsonlWriter::~JsonlWriter() { (void)close(); }

void JsonlWriter::write(const nlohmann::json& record) { write_line(record.dump()); }

void JsonlWriter::write_line(std::string_view line) {
  if (!status_.ok() || fd_ < 0) return;
  buffer_.append(line);
  if (line.empty() || line.back() != '\n') buffer_.push_back('\n');
  ++lines_;
}

Status JsonlWriter::flush() {
  if (status_.ok() && fd_ >= 0 && !buffer_.empty()) {
    status_ = write_all(fd_, buffer_, path_);
    if (status_.ok()) {
      size_ += static_cast<int64_t>(buffer_.size());
    } else if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {  // drop a partly written line
      status_ = Status(status_.code(), fmt::format("{}; and cutting it back to its last whole line failed: {}",
                                                   status_.message(), std::strerror(errno)));
    }
  }
  buffer_.clear();
  return status_;
}

Status JsonlWriter::sync() {
  SP_RETURN_IF_ERROR(flush());
  if (fd_ >= 0 && ::fsync(fd_) != 0) status_ = io_error("cannot fsync '{}': {}", path_, std::strerror(errno));
  return status_;
}

Status JsonlWriter::close() {
  if (fd_ < 0) return status_;
  (void)flush();
  if (::close(fd_) != 0 && status_.ok()) status_ = io_error("cannot close '{}': {}", path_, std::strerror(errno));
  fd_ = -1;
  return status_;
}

}  // namespace sp

#include "ckpt/safetensors_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>

namespace sp::ckpt::st_detail {

// (Messages may end up in JSON evidence, which must stay valid UTF-8. Tensor names and metadata keys are
// valid UTF-8 once parsed; raw tokens need not be.)
std::string escaped(std::string_view s, size_t max_bytes, bool ascii_only) {
  std::string out;
  size_t n = std::min(s.size(), max_bytes);
  while (!ascii_only && n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F || c == '\'' || c == '\\' || (ascii_only && c >= 0x80))
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  if (n < s.size()) out += fmt::format("...({} bytes)", s.size());
  return out;
}

std::string quote_name(std::string_view s) { return fmt::format("'{}'", escaped(s, kMaxQuoted, false)); }

std::string dtype_list() {  // kBool is the last DType
  std::vector<std::string_view> names;
  for (int t = 0; t <= static_cast<int>(DType::kBool); ++t) names.push_back(dtype_name(static_cast<DType>(t)));
  return fmt::format("{}", fmt::join(names, ", "));
}

Status check_file_size(const std::string& label, uint64_t file_size) {
  if (file_size >= kSafetensorsLengthBytes) return Status();
  return corrupt("safetensors '{}': file is {} bytes, shorter than the 8-byte header length", label, file_size)
      .with_hint("the file is truncated or is not a safetensors file");
}

Result<uint64_t> check_header_length(const std::string& label, uint64_t file_size, const unsigned char* le8,
                                     const SafetensorsLimits& limits) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | le8[i];
  if (n == 0)
    return corrupt("safetensors '{}': header length (bytes 0..8) is 0; a header holds at least '{{}}'", label);
  if (n > limits.max_header_bytes)
    return corrupt("safetensors '{}': header length {} (bytes 0..8) exceeds the limit of {} bytes", label, n,
                   limits.max_header_bytes)
        .with_hint("a damaged length field, or raise SafetensorsLimits::max_header_bytes for a trusted file");
  if (n > file_size - kSafetensorsLengthBytes)
    return corrupt("safetensors '{}': header length {} (bytes 0..8) runs past the end of the {}-byte file", label, n,
                   file_size)
        .with_hint("the file is truncated or its first 8 bytes are damaged");
  return n;
}

namespace {

// SAX consumer. Accepted shape, depth at most 3:
//   { "__metadata__": {str: str}, name: {"dtype": str, "shape": [u64...], "data_offsets": [u64, u64]}, ... }
// Each entry is checked as it closes (keys, dtype, overflow, offsets vs. size and data section);
// the tiling of the data section is checked by the caller once all entries are known.
class HeaderSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderSax(const std::string& label, uint64_t data_size, uint64_t max_tensors)
      : label_(label), data_size_(data_size), max_tensors_(max_tensors) {}

  Status status;  // the first error; parsing stops there
  std::vector<SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;

  bool null() override { return scalar("null"); }
  bool boolean(bool) override { return scalar("a boolean"); }
  bool number_integer(number_integer_t v) override {
    if (v >= 0 && (state_ == State::kShape || state_ == State::kOffsets)) return element(static_cast<uint64_t>(v));
    return scalar(fmt::format("number {}", v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (state_ == State::kShape || state_ == State::kOffsets) return element(v);
    return scalar(fmt::format("number {}", v));
  }
  bool number_float(number_float_t, const string_t& raw) override {
    return scalar(fmt::format("number {}", quote_name(raw)));
  }
  bool binary(binary_t&) override { return scalar("binary"); }
  bool string(string_t& v) override {
    if (state_ == State::kMetaValue) {
      metadata.emplace(std::move(meta_key_), std::move(v));
      state_ = State::kMeta;
      return true;
    }
    if (state_ == State::kEntryValue && field_ == kDtype) {
      const std::optional<DType> t = dtype_from_name(v);
      if (!t) return fail(tensor_error("unknown dtype {}", quote_name(v)).with_hint("known dtypes: " + dtype_list()));
      cur_.dtype = *t;
      state_ = State::kEntry;
      return true;
    }
    return scalar(fmt::format("string {}", quote_name(v)));
  }
  bool start_object(std::size_t) override {
    switch (state_) {
      case State::kTop:
        state_ = State::kRoot;
        return true;
      case State::kRootValue:
        if (in_metadata_) {
          state_ = State::kMeta;
        } else {
          state_ = State::kEntry;
          std::fill(std::begin(seen_), std::end(seen_), false);
        }
        return true;
      default:
        return scalar("an object");
    }
  }
  bool start_array(std::size_t) override {
    if (state_ == State::kEntryValue && field_ != kDtype) {
      state_ = field_ == kShape ? State::kShape : State::kOffsets;
      return true;
    }
    return scalar("an array");
  }
  bool key(string_t& k) override {
    if (state_ == State::kRoot) {
      state_ = State::kRootValue;
      in_metadata_ = k == kSafetensorsMetadataKey;
      if (in_metadata_) {
        if (seen_metadata_)
          return fail(corrupt("safetensors '{}': \"__metadata__\" appears twice in the header", label_));
        seen_metadata_ = true;
        return true;
      }
      if (!names_.insert(k).second)
        return fail(corrupt("safetensors '{}': duplicate tensor name {} in the header", label_, quote_name(k)));
      if (names_.size() > max_tensors_)
        return fail(corrupt("safetensors '{}': header holds more than {} tensors", label_, max_tensors_)
                        .with_hint("raise SafetensorsLimits::max_tensors for a trusted file"));
      cur_ = SafetensorsEntry{};
      cur_.name = k;
      offsets_.clear();
      dims_.clear();
      return true;
    }
    if (state_ == State::kMeta) {
      if (metadata.count(k))
        return fail(corrupt("safetensors '{}': \"__metadata__\" has key {} twice", label_, quote_name(k)));
      meta_key_ = std::move(k);
      state_ = State::kMetaValue;
      return true;
    }
    // State::kEntry: the grammar guarantees keys only arrive inside objects.
    if (k == "dtype")
      field_ = kDtype;
    else if (k == "shape")
      field_ = kShape;
    else if (k == "data_offsets")
      field_ = kOffsets;
    else
      return fail(tensor_error("unknown key {} (allowed: dtype, shape, data_offsets)", quote_name(k)));
    if (seen_[field_]) return fail(tensor_error("key {} appears twice", quote_name(k)));
    seen_[field_] = true;
    state_ = State::kEntryValue;
    return true;
  }
  bool end_object() override {
    if (state_ == State::kRoot)
      state_ = State::kDone;
    else if (state_ == State::kMeta)
      state_ = State::kRoot;
    else
      return finish_entry();  // State::kEntry
    return true;
  }
  bool end_array() override {
    if (state_ == State::kOffsets && offsets_.size() != 2)
      return fail(tensor_error("data_offsets has {} elements, expected two: [begin, end]", offsets_.size()));
    state_ = State::kEntry;
    return true;
  }
  bool parse_error(std::size_t position, const std::string& last_token, const nlohmann::detail::exception& e) override {
    const std::string what = escaped(e.what(), 3 * kMaxQuoted, /*ascii_only=*/true);
    return fail(corrupt("safetensors '{}': header is not valid JSON near header byte {} (file offset {}): {}", label_,
                        position, position + kSafetensorsLengthBytes, what)
                    .with_hint("the header must be one UTF-8 JSON object, optionally padded with spaces"));
  }

 private:
  enum class State { kTop, kRoot, kRootValue, kMeta, kMetaValue, kEntry, kEntryValue, kShape, kOffsets, kDone };
  enum Field { kDtype = 0, kShape = 1, kOffsets = 2 };
  static constexpr const char* kFieldNames[3] = {"dtype", "shape", "data_offsets"};

  bool fail(Status s) {
    status = std::move(s);
    return false;
  }
  template <typename... Args>
  Status tensor_error(fmt::format_string<Args...> f, Args&&... args) const {
    return corrupt("safetensors '{}': tensor {}: {}", label_, quote_name(cur_.name),
                   fmt::format(f, std::forward<Args>(args)...));
  }

  // A value of kind `found` where the state expects something else.
  bool scalar(const std::string& found) {
    switch (state_) {
      case State::kTop:
        return fail(corrupt("safetensors '{}': header is not a JSON object (found {})", label_, found));
      case State::kRootValue:
        if (in_metadata_)
          return fail(corrupt("safetensors '{}': \"__metadata__\" is not an object of string to string (found {})",
                              label_, found));
        return fail(tensor_error("entry is not an object (found {})", found));
      case State::kMeta:
      case State::kMetaValue:
        return fail(corrupt("safetensors '{}': \"__metadata__\" value for key {} is not a string (found {})", label_,
                            quote_name(meta_key_), found));
      case State::kEntryValue:
        if (field_ == kDtype) return fail(tensor_error("dtype is not a string (found {})", found));
        return fail(tensor_error("{} is not an array of non-negative integers (found {})", kFieldNames[field_], found));
      case State::kShape:
        return fail(tensor_error("shape element {} is not a non-negative integer (found {})", dims_.size(), found));
      case State::kOffsets:
        return fail(
            tensor_error("data_offsets element {} is not a non-negative integer (found {})", offsets_.size(), found));
      default:
        return fail(internal_error("safetensors '{}': unexpected {} in the header", label_, found));
    }
  }

  bool element(uint64_t v) {
    if (state_ == State::kShape) {
      if (dims_.size() == kSafetensorsMaxDims)
        return fail(tensor_error("shape has more than {} dims", kSafetensorsMaxDims));
      dims_.push_back(v);
    } else {
      if (offsets_.size() == 2)
        return fail(tensor_error("data_offsets has more than two elements, expected [begin, end]"));
      offsets_.push_back(v);
    }
    return true;
  }

  bool finish_entry() {
    for (int f = 0; f < 3; ++f)
      if (!seen_[f]) return fail(tensor_error("missing key '{}'", kFieldNames[f]));
    // Element count must fit int64 at every step (Shape is int64_t; shape_numel multiplies in order),
    // and the byte size must fit uint64.
    uint64_t numel = 1;
    for (uint64_t d : dims_) {
      if (d > static_cast<uint64_t>(INT64_MAX) || (d != 0 && numel > static_cast<uint64_t>(INT64_MAX) / d))
        return fail(
            tensor_error("shape [{}] overflows: the element count does not fit in 64 bits", fmt::join(dims_, ", ")));
      numel *= d;
    }
    const uint64_t elem = dtype_size(cur_.dtype);
    if (numel > UINT64_MAX / elem)
      return fail(tensor_error("shape [{}] of {} overflows: the byte size does not fit in 64 bits",
                               fmt::join(dims_, ", "), dtype_name(cur_.dtype)));
    const uint64_t nbytes = numel * elem;
    const uint64_t begin = offsets_[0], end = offsets_[1];
    if (begin > end) return fail(tensor_error("data_offsets [{}, {}] has begin > end", begin, end));
    if (end - begin != nbytes)
      return fail(tensor_error("data_offsets [{}, {}] span {} bytes but shape [{}] of {} needs {}", begin, end,
                               end - begin, fmt::join(dims_, ", "), dtype_name(cur_.dtype), nbytes));
    if (end > data_size_)
      return fail(tensor_error("data_offsets [{}, {}] run past the {}-byte data section", begin, end, data_size_)
                      .with_hint("the file is truncated or the header is damaged"));
    cur_.shape.assign(dims_.begin(), dims_.end());
    cur_.begin = begin;
    cur_.end = end;
    entries.push_back(std::move(cur_));
    state_ = State::kRoot;
    return true;
  }

  const std::string& label_;
  const uint64_t data_size_;
  const uint64_t max_tensors_;
  State state_ = State::kTop;
  bool in_metadata_ = false, seen_metadata_ = false;
  Field field_ = kDtype;
  bool seen_[3] = {false, false, false};
  std::set<std::string, std::less<>> names_;  // a tree, not a hash: no crafted-collision slowdown
  std::string meta_key_;
  SafetensorsEntry cur_;
  std::vector<uint64_t> dims_, offsets_;
};

// Sorted by begin, the entries must tile [0, data_size) exactly: no overlap, no gap, no trailing bytes.
Status check_tiling(const std::string& label, const std::vector<SafetensorsEntry>& sorted, uint64_t data_offset,
                    uint64_t data_size) {
  uint64_t cursor = 0;
  const SafetensorsEntry* prev = nullptr;
  for (const SafetensorsEntry& e : sorted) {
    if (e.begin < cursor)
      return corrupt("safetensors '{}': tensors {} [{}, {}) and {} [{}, {}) overlap", label, quote_name(prev->name),
                     prev->begin, prev->end, quote_name(e.name), e.begin, e.end);
    if (e.begin > cursor) {
      if (prev == nullptr)
        return corrupt("safetensors '{}': data bytes [0, {}) belong to no tensor (the first, {}, begins at {})", label,
                       e.begin, quote_name(e.name), e.begin);
      return corrupt("safetensors '{}': gap of {} bytes between tensor {} (ends at {}) and tensor {} (begins at {})",
                     label, e.begin - cursor, quote_name(prev->name), cursor, quote_name(e.name), e.begin);
    }
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_size)
    return corrupt(
               "safetensors '{}': {} trailing bytes after the last tensor (tensors end at file offset {}, the "
               "file is {} bytes)",
               label, data_size - cursor, data_offset + cursor, data_offset + data_size)
        .with_hint("the file has bytes appended, or the header lost an entry");
  return Status();
}

}  // namespace

Result<ParsedHeader> parse_header(const std::string& label, uint64_t file_size, std::string_view header,
                                  const SafetensorsLimits& limits) {
  const uint64_t data_offset = kSafetensorsLengthBytes + header.size();
  // Two leniencies of the JSON parser are closed here: it skips a UTF-8 byte-order mark and stops at a
  // NUL byte as if the input ended (so "{}\0<anything>" would parse). The format says the header MUST
  // begin with '{' (upstream README; the Rust reader enforces it as InvalidHeaderStart), and a raw NUL
  // is never valid JSON.
  if (header.front() != '{')
    return corrupt("safetensors '{}': header is not a JSON object: it starts with '{}', not '{{'", label,
                   escaped(header.substr(0, 1), 1, /*ascii_only=*/true))
        .with_hint("the file is not a safetensors file, or its first bytes are damaged");
  if (const size_t nul = header.find('\0'); nul != std::string_view::npos)
    return corrupt("safetensors '{}': header is not valid JSON: NUL byte at header byte {} (file offset {})", label,
                   nul, nul + kSafetensorsLengthBytes);
  HeaderSax sax(label, file_size - data_offset, limits.max_tensors);
  try {
    const bool parsed = nlohmann::json::sax_parse(header.data(), header.data() + header.size(), &sax);
    if (!parsed && sax.status.ok())
      return internal_error("safetensors '{}': header parse stopped without a reason", label);
  } catch (const std::exception& e) {  // the SAX parser reports through parse_error; this is belt and braces
    return corrupt("safetensors '{}': header cannot be parsed: {}", label, escaped(e.what(), 3 * kMaxQuoted, true));
  }
  SP_RETURN_IF_ERROR(sax.status);
  ParsedHeader out;
  out.entries = std::move(sax.entries);
  std::stable_sort(out.entries.begin(), out.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  SP_RETURN_IF_ERROR(check_tiling(label, out.entries, data_offset, file_size - data_offset));
  out.metadata = std::move(sax.metadata);
  return out;
}

}  // namespace sp::ckpt::st_detail

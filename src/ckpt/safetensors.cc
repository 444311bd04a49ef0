// Safetensors reader (strict header validation, bytes read on demand) and writer (streamed, fsynced).
// The header is parsed with nlohmann's SAX interface into a fixed-depth state machine: no DOM is
// built, nesting deeper than root -> entry -> shape/offsets is rejected at once, and every duplicate
// key is seen (a DOM parse keeps the last duplicate silently). Rules and messages:
// docs/formats/safetensors.md.
#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>

namespace sp::ckpt {

struct SafetensorsReader::Source {
  int fd = -1;        // open() readers
  std::string bytes;  // from_bytes() readers: the whole image
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  ~Source() {
    if (fd >= 0) ::close(fd);
  }
};

namespace {

constexpr size_t kMaxQuoted = 120;            // bytes of a name or token quoted in a message
constexpr uint64_t kWriteChunk = 8ull << 20;  // writer coalesces small tensors up to this many bytes

// Bytes from the file, safe to print: control bytes (and, with ascii_only, every byte >= 0x80) escaped
// as \xNN; long strings cut at a UTF-8 boundary (messages may end up in JSON evidence, which must stay
// valid UTF-8). Tensor names and metadata keys are valid UTF-8 once parsed; raw tokens need not be.
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

// Reads exactly n bytes at `offset`; a short read means the file shrank after open.
Status pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path, std::string_view what) {
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error("safetensors '{}': cannot read {} at file offset {}: {}", path, what, offset + done,
                      std::strerror(errno));
    }
    if (got == 0)
      return corrupt("safetensors '{}': file ended at byte {} while reading {} (bytes {}..{})", path, offset + done,
                     what, offset, offset + n)
          .with_hint("the file was truncated or replaced after it was opened");
    done += static_cast<uint64_t>(got);
  }
  return Status();
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

// ---------------------------------------------------------------------------------------------- reader

Result<SafetensorsReader> SafetensorsReader::open(const std::string& path, SafetensorsLimits limits) {
  auto source = std::make_shared<Source>();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused as not a regular file);
  // reads from a regular file ignore the flag.
  source->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (source->fd < 0) {
    if (errno == ENOENT) return not_found("safetensors file '{}' does not exist", path);
    return io_error("cannot open safetensors file '{}': {}", path, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(source->fd, &st) != 0)
    return io_error("cannot stat safetensors file '{}': {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return invalid_argument("safetensors '{}' is not a regular file", path);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  SP_RETURN_IF_ERROR(check_file_size(path, file_size));
  unsigned char le8[kSafetensorsLengthBytes];
  SP_RETURN_IF_ERROR(pread_all(source->fd, le8, sizeof le8, 0, path, "the header length"));
  SP_ASSIGN_OR_RETURN(const uint64_t n, check_header_length(path, file_size, le8, limits));
  std::string header(n, '\0');  // n <= min(limit, file size - 8): bounded by the real file
  SP_RETURN_IF_ERROR(pread_all(source->fd, header.data(), n, kSafetensorsLengthBytes, path, "the header"));
  return from_header(std::move(source), path, file_size, header, limits);
}

Result<SafetensorsReader> SafetensorsReader::from_bytes(std::string bytes, std::string label,
                                                        SafetensorsLimits limits) {
  auto source = std::make_shared<Source>();
  source->bytes = std::move(bytes);
  const std::string& b = source->bytes;
  SP_RETURN_IF_ERROR(check_file_size(label, b.size()));
  SP_ASSIGN_OR_RETURN(const uint64_t n,
                      check_header_length(label, b.size(), reinterpret_cast<const unsigned char*>(b.data()), limits));
  const std::string_view header(b.data() + kSafetensorsLengthBytes, n);
  return from_header(source, std::move(label), b.size(), header, limits);
}

Result<SafetensorsReader> SafetensorsReader::from_header(std::shared_ptr<const Source> source, std::string label,
                                                         uint64_t file_size, std::string_view header,
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

  SafetensorsReader r;
  r.tensors_ = std::move(sax.entries);
  std::stable_sort(r.tensors_.begin(), r.tensors_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  SP_RETURN_IF_ERROR(check_tiling(label, r.tensors_, data_offset, file_size - data_offset));
  for (size_t i = 0; i < r.tensors_.size(); ++i) r.index_.emplace(r.tensors_[i].name, i);
  r.metadata_ = std::move(sax.metadata);
  r.label_ = std::move(label);
  r.source_ = std::move(source);
  r.data_offset_ = data_offset;
  r.data_size_ = file_size - data_offset;
  return r;
}

const SafetensorsEntry* SafetensorsReader::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Status SafetensorsReader::read(const SafetensorsEntry& entry, void* dst) const {
  if (entry.begin > entry.end || entry.end > data_size_)
    return invalid_argument("safetensors '{}': tensor {} [{}, {}) is not inside the {}-byte data section", label_,
                            quote_name(entry.name), entry.begin, entry.end, data_size_)
        .with_hint("pass an entry of this reader (tensors() or find())");
  if (entry.nbytes() == 0) return Status();
  if (source_->fd < 0) {
    std::memcpy(dst, source_->bytes.data() + data_offset_ + entry.begin, entry.nbytes());
    return Status();
  }
  return pread_all(source_->fd, dst, entry.nbytes(), data_offset_ + entry.begin, label_,
                   fmt::format("tensor {}", quote_name(entry.name)));
}

Status SafetensorsReader::read_f32(std::string_view name, const Shape& expected_shape, float* dst) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr)
    return not_found("safetensors '{}': no tensor {} (the file has {} tensors)", label_, quote_name(name),
                     tensors_.size());
  if (e->dtype != DType::kF32)
    return failed_precondition("safetensors '{}': tensor {} is {}, expected F32", label_, quote_name(name),
                               dtype_name(e->dtype));
  if (e->shape != expected_shape)
    return failed_precondition("safetensors '{}': tensor {} has shape {}, expected {}", label_, quote_name(name),
                               shape_string(e->shape), shape_string(expected_shape))
        .with_hint("the weights were saved for a different model configuration");
  return read(*e, dst);
}

// ---------------------------------------------------------------------------------------------- writer

namespace {
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();  // the same check (strict) the header dump applies
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

Status write_all(int fd, const char* p, uint64_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t put = ::write(fd, p, std::min<uint64_t>(n, 1ull << 30));
    if (put < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot write safetensors file '{}': {}", path, std::strerror(errno));
    }
    p += put;
    n -= static_cast<uint64_t>(put);
  }
  return Status();
}
}  // namespace

void SafetensorsWriter::set_metadata(std::string key, std::string value) {
  SP_CHECK(valid_utf8(key) && valid_utf8(value), "safetensors metadata key {} or its value is not valid UTF-8",
           quote_name(key));
  metadata_[std::move(key)] = std::move(value);
}

void SafetensorsWriter::add(std::string name, DType dtype, Shape shape, const void* data) {
  SP_CHECK(name != kSafetensorsMetadataKey && valid_utf8(name),
           "safetensors tensor name {} is reserved or not valid UTF-8", quote_name(name));
  SP_CHECK(!index_.count(name), "safetensors tensor {} added twice", quote_name(name));
  SP_CHECK(shape.size() <= kSafetensorsMaxDims, "tensor {} has {} dims, more than {}", quote_name(name), shape.size(),
           kSafetensorsMaxDims);
  const auto numel = static_cast<uint64_t>(shape_numel(shape));  // SP_CHECKs negative dims and overflow
  const uint64_t elem = dtype_size(dtype);
  SP_CHECK(numel <= UINT64_MAX / elem && data_bytes_ <= UINT64_MAX - numel * elem, "tensor {} overflows the file",
           quote_name(name));
  SP_CHECK(data != nullptr || numel == 0, "tensor {} has no data", quote_name(name));
  index_.emplace(name, items_.size());
  items_.push_back(Item{std::move(name), dtype, std::move(shape), data, numel * elem});
  data_bytes_ += numel * elem;
}

std::string SafetensorsWriter::header_bytes() const {
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata_.empty()) root[std::string(kSafetensorsMetadataKey)] = metadata_;
  uint64_t offset = 0;
  for (const Item& it : items_) {
    nlohmann::ordered_json e = nlohmann::ordered_json::object();
    e["dtype"] = dtype_name(it.dtype);
    e["shape"] = it.shape;
    e["data_offsets"] = nlohmann::ordered_json::array({offset, offset + it.nbytes});
    root[it.name] = std::move(e);
    offset += it.nbytes;
  }
  std::string json = root.dump();  // compact, raw UTF-8: the layout of the reference (Rust) writer
  json.append((kSafetensorsHeaderAlign - json.size() % kSafetensorsHeaderAlign) % kSafetensorsHeaderAlign, ' ');
  std::string out(kSafetensorsLengthBytes, '\0');
  for (uint64_t i = 0, n = json.size(); i < kSafetensorsLengthBytes; ++i, n >>= 8) out[i] = static_cast<char>(n & 0xFF);
  return out + json;
}

uint64_t SafetensorsWriter::file_size() const { return header_bytes().size() + data_bytes_; }

std::string SafetensorsWriter::to_bytes() const {
  std::string out = header_bytes();
  out.reserve(out.size() + data_bytes_);
  for (const Item& it : items_) out.append(static_cast<const char*>(it.data), it.nbytes);
  return out;
}

Status SafetensorsWriter::write(const std::string& path) const {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create safetensors file '{}': {}", path, std::strerror(errno));
  // Small tensors are gathered into one buffer of up to kWriteChunk bytes; large ones go straight out.
  std::string buffer = header_bytes();
  Status s;
  for (const Item& it : items_) {
    if (!s.ok()) break;
    if (buffer.size() + it.nbytes > kWriteChunk) {
      s = write_all(fd, buffer.data(), buffer.size(), path);
      buffer.clear();
    }
    if (!s.ok()) break;
    if (it.nbytes >= kWriteChunk)
      s = write_all(fd, static_cast<const char*>(it.data), it.nbytes, path);
    else
      buffer.append(static_cast<const char*>(it.data), it.nbytes);
  }
  if (s.ok()) s = write_all(fd, buffer.data(), buffer.size(), path);
  if (s.ok() && ::fsync(fd) != 0) s = io_error("cannot fsync safetensors file '{}': {}", path, std::strerror(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (::close(fd) != 0 && s.ok()) s = io_error("cannot close safetensors file '{}': {}", path, std::strerror(errno));
  if (!s.ok() && regular) ::unlink(path.c_str());  // never leave a torn file under the final name
  return s;
}

}  // namespace sp::ckpt

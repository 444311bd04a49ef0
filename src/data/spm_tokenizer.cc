#include "data/spm_tokenizer.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <cstdint>

#include "core/check.h"
#include "data/tokenizer.h"

namespace sp::data {
namespace {

class SpmTokenizer : public TextEncoder {
 public:
  explicit SpmTokenizer(std::string name) : name_(std::move(name)) {}
  std::string_view kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_.GetPieceSize(); }
  uint32_t eos_id() const override { return static_cast<uint32_t>(sp_.eos_id()); }
  std::string eos_token() const override { return sp_.IdToPiece(sp_.eos_id()); }
  void encode_append(std::string_view text, std::vector<uint32_t>& out) const override {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    // Encoding a loaded model fails only on a broken invariant of the library (it accepts any bytes).
    SP_CHECK(st.ok(), "SentencePiece model '{}' could not encode {} bytes: {}", name_, text.size(), st.ToString());
    out.reserve(out.size() + ids.size());
    for (int id : ids) out.push_back(static_cast<uint32_t>(id));
  }
  sentencepiece::SentencePieceProcessor& processor() { return sp_; }

 private:
  std::string name_;
  sentencepiece::SentencePieceProcessor sp_;
};

// The top-level fields of a serialized ModelProto (sentencepiece_model.proto: 1 pieces, 2 trainer_spec,
// 3 normalizer_spec, 4 self_test_data, 5 denormalizer_spec), walked in the protobuf wire format before the
// library sees the bytes, so that a damaged file is named as one. "" when every field lies inside the file and
// the pieces, trainer_spec and normalizer_spec are there (spm_train writes them in that order; a file cut
// between two fields lacks the later ones); else what is wrong, at which byte.
std::string wire_problem(const std::string& bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t at = 0;
  const auto varint = [&](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && at < n; shift += 7) {
      const unsigned char b = p[at++];
      v |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80u) == 0) return true;
    }
    return false;
  };
  bool seen[6] = {};
  while (at < n) {
    const size_t start = at;
    uint64_t key = 0, len = 0;
    if (!varint(key)) return fmt::format("the field key at byte {} runs past the end", start);
    const uint64_t field = key >> 3, wire = key & 7;
    // Fields 1–5 are messages (wire type 2); 200 and above are the proto's extension range.
    if (field >= 200 && (wire == 0 || wire == 1 || wire == 5)) {
      if (wire == 0 ? !varint(len) : (at += wire == 1 ? 8 : 4) > n)
        return fmt::format("field {} at byte {} runs past the end of the file", field, start);
      continue;
    }
    if (field == 0 || (field > 5 && field < 200) || wire != 2)
      return fmt::format("byte {} starts no field of a SentencePiece model (field {}, wire type {})", start, field,
                         wire);
    if (!varint(len) || len > n - at)
      return fmt::format("field {} at byte {} runs past the end of the file", field, start);
    at += static_cast<size_t>(len);
    if (field <= 5) seen[field] = true;
  }
  if (!seen[1]) return "it holds no piece";
  if (!seen[2] || !seen[3])
    return fmt::format("it ends after {} without the {}: the file is cut short",
                       seen[2] ? "the trainer_spec" : "the pieces",
                       seen[2] ? "normalizer_spec" : "trainer_spec and normalizer_spec");
  return "";
}

}  // namespace

Result<std::unique_ptr<TextEncoder>> load_spm_tokenizer(const std::string& bytes, const std::string& name) {
  const auto refused = [&](const std::string& why) {
    return invalid_argument("tokenizer '{}' ({} bytes) is not a complete SentencePiece model: {}", name, bytes.size(),
                            why)
        .with_hint(
            "give a SentencePiece tokenizer.model (copy it again if it was cut short: its SHA-256 must be the "
            "original's), or a Hugging Face tokenizer.json (docs/data.md)");
  };
  if (bytes.empty()) return refused("the file is empty");
  if (const std::string problem = wire_problem(bytes); !problem.empty()) return refused(problem);
  auto t = std::make_unique<SpmTokenizer>(name);
  // The library's own checks (pieces, their types, the special ids) behind our message; its words last.
  const auto st = t->processor().LoadFromSerializedProto(bytes);
  if (!st.ok())
    return refused(fmt::format("its pieces or settings are inconsistent (SentencePiece: {})", st.message()));
  if (t->processor().eos_id() < 0)
    return invalid_argument("SentencePiece model '{}' has no end-of-sequence piece (eos_id = -1)", name)
        .with_hint("documents are separated by the end-of-sequence id; train the model with --eos_id set (LLaMA: 2)");
  if (t->vocab_size() > kMaxVocabSize)
    return invalid_argument("SentencePiece model '{}' has {} pieces, more than the supported {}", name, t->vocab_size(),
                            kMaxVocabSize);
  return std::unique_ptr<TextEncoder>(std::move(t));
}

}  // namespace sp::data

#include "data/spm_tokenizer.h"

#include <sentencepiece_processor.h>

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

}  // namespace

Result<std::unique_ptr<TextEncoder>> load_spm_tokenizer(const std::string& bytes, const std::string& name) {
  auto t = std::make_unique<SpmTokenizer>(name);
  const auto st = t->processor().LoadFromSerializedProto(bytes);
  if (!st.ok())
    return invalid_argument("tokenizer '{}' is not a SentencePiece model: {}", name, st.ToString())
        .with_hint("give a SentencePiece tokenizer.model, or a Hugging Face tokenizer.json (docs/data.md)");
  if (t->processor().eos_id() < 0)
    return invalid_argument("SentencePiece model '{}' has no end-of-sequence piece (eos_id = -1)", name)
        .with_hint("documents are separated by the end-of-sequence id; train the model with --eos_id set (LLaMA: 2)");
  if (t->vocab_size() > kMaxVocabSize)
    return invalid_argument("SentencePiece model '{}' has {} pieces, more than the supported {}", name, t->vocab_size(),
                            kMaxVocabSize);
  return std::unique_ptr<TextEncoder>(std::move(t));
}

}  // namespace sp::data

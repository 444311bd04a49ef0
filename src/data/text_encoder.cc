#include "data/text_encoder.h"

#include "core/file_io.h"
#include "core/json_io.h"
#include "data/hf_tokenizer.h"
#include "data/spm_tokenizer.h"
#include "data/tokenizer.h"

namespace sp::data {

Result<std::unique_ptr<TextEncoder>> load_text_encoder(const std::string& bytes, const std::string& name) {
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    return invalid_argument("tokenizer '{}' is empty ({} bytes{})", name, bytes.size(),
                            bytes.empty() ? "" : ", all whitespace")
        .with_hint(
            "data.tokenizer (or --tokenizer) names a SentencePiece tokenizer.model or a tokenizer.json; copy the "
            "file again");
  if (bytes[first] != '{') return load_spm_tokenizer(bytes, name);
  SP_ASSIGN_OR_RETURN(const nlohmann::json j, parse_json_strict(bytes, name));
  if (j.is_object() && j.contains("format")) {  // an earlier `data prepare`'s own tokenizer.json
    auto own = Tokenizer::from_json(bytes, name);
    if (!own.ok()) return own.status();
    return std::unique_ptr<TextEncoder>(std::make_unique<Tokenizer>(std::move(own).value()));
  }
  return load_hf_tokenizer(j, name);
}

Result<TokenizerFile> read_tokenizer_file(const std::string& path) {
  // LLaMA-3's tokenizer.json is 9 MB; nothing a tokenizer file holds needs more than 256 MiB.
  auto bytes = read_file(path, uint64_t{256} << 20);
  if (!bytes.ok()) {
    const StatusCode code =
        bytes.status().code() == StatusCode::kNotFound ? StatusCode::kInvalidArgument : bytes.status().code();
    return Status(code, "tokenizer: " + bytes.status().message(),
                  "data.tokenizer (or --tokenizer) names a SentencePiece tokenizer.model or a tokenizer.json");
  }
  TokenizerFile f;
  SP_ASSIGN_OR_RETURN(f.encoder, load_text_encoder(*bytes, path));
  f.bytes = std::move(bytes).value();
  return f;
}

}  // namespace sp::data

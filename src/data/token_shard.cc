#include "data/token_shard.h"

#include <cstring>

#include "core/check.h"
#include "data/tokenizer.h"

namespace sp::data {
namespace {

template <typename T>
void put_le(std::string& s, size_t off, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) s[off + i] = static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xFF);
}

template <typename T>
T get_le(std::string_view s, size_t off) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[off + i])) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

uint32_t shard_dtype_bytes(int64_t vocab_size) { return vocab_size <= 65536 ? 2u : 4u; }

std::string shard_encode(const ShardHeader& h, std::span<const uint32_t> tokens) {
  SP_CHECK(h.dtype_bytes == 2 || h.dtype_bytes == 4, "shard dtype_bytes {}", h.dtype_bytes);
  SP_CHECK_EQ(h.num_tokens, tokens.size(), "shard header token count");
  std::string s(kShardHeaderBytes + tokens.size() * h.dtype_bytes, '\0');
  std::memcpy(s.data() + ShardLayout::kMagic, kShardMagic, sizeof(kShardMagic));
  put_le<uint32_t>(s, ShardLayout::kVersion, kShardVersion);
  put_le<uint32_t>(s, ShardLayout::kHeaderBytes, kShardHeaderBytes);
  put_le<uint32_t>(s, ShardLayout::kDtypeBytes, h.dtype_bytes);
  put_le<uint32_t>(s, ShardLayout::kSplit, h.split);
  put_le<uint64_t>(s, ShardLayout::kVocabSize, h.vocab_size);
  put_le<uint64_t>(s, ShardLayout::kNumTokens, h.num_tokens);
  put_le<uint64_t>(s, ShardLayout::kNumDocuments, h.num_documents);
  put_le<uint64_t>(s, ShardLayout::kShardIndex, h.shard_index);
  size_t off = kShardHeaderBytes;
  for (uint32_t t : tokens) {
    SP_CHECK_LT(t, h.vocab_size, "token id written to a shard");
    if (h.dtype_bytes == 2)
      put_le<uint16_t>(s, off, static_cast<uint16_t>(t));
    else
      put_le<uint32_t>(s, off, t);
    off += h.dtype_bytes;
  }
  return s;
}

Result<ShardHeader> shard_decode(std::string_view s, const std::string& name, const ShardHeader* expect,
                                 std::vector<uint32_t>* out, uint32_t eot_id) {
  if (s.size() < kShardHeaderBytes)
    return corrupt("token shard '{}' is truncated: {} bytes, the header alone needs {} (offset {})", name, s.size(),
                   kShardHeaderBytes, s.size());
  if (std::memcmp(s.data(), kShardMagic, sizeof(kShardMagic)) != 0)
    return corrupt("token shard '{}' has a bad magic at offset 0 (expected \"SPTOKENS\")", name);
  const uint32_t version = get_le<uint32_t>(s, ShardLayout::kVersion);
  if (version != kShardVersion)
    return corrupt("token shard '{}' has version {} at offset {}; this build reads version {}", name, version,
                   ShardLayout::kVersion, kShardVersion);
  if (get_le<uint32_t>(s, ShardLayout::kHeaderBytes) != kShardHeaderBytes)
    return corrupt("token shard '{}' has header size {} at offset {}, expected {}", name,
                   get_le<uint32_t>(s, ShardLayout::kHeaderBytes), ShardLayout::kHeaderBytes, kShardHeaderBytes);
  ShardHeader h;
  h.dtype_bytes = get_le<uint32_t>(s, ShardLayout::kDtypeBytes);
  h.split = get_le<uint32_t>(s, ShardLayout::kSplit);
  h.vocab_size = get_le<uint64_t>(s, ShardLayout::kVocabSize);
  h.num_tokens = get_le<uint64_t>(s, ShardLayout::kNumTokens);
  h.num_documents = get_le<uint64_t>(s, ShardLayout::kNumDocuments);
  h.shard_index = get_le<uint64_t>(s, ShardLayout::kShardIndex);
  if (h.dtype_bytes != 2 && h.dtype_bytes != 4)
    return corrupt("token shard '{}' has dtype_bytes {} at offset {}; expected 2 (uint16) or 4 (uint32)", name,
                   h.dtype_bytes, ShardLayout::kDtypeBytes);
  if (h.split > 1)
    return corrupt("token shard '{}' has split {} at offset {}; expected 0 (train) or 1 (eval)", name, h.split,
                   ShardLayout::kSplit);
  if (h.vocab_size == 0 || h.vocab_size > (uint64_t{1} << 32) || (h.dtype_bytes == 2 && h.vocab_size > 65536))
    return corrupt("token shard '{}' has vocab_size {} at offset {}, impossible for {}-byte tokens", name, h.vocab_size,
                   ShardLayout::kVocabSize, h.dtype_bytes);
  for (size_t i = ShardLayout::kReserved; i < ShardLayout::kTokens; ++i)
    if (s[i] != 0) return corrupt("token shard '{}' has a non-zero reserved byte at offset {}", name, i);
  if (expect) {
    if (h.vocab_size != expect->vocab_size)
      return corrupt("token shard '{}' has vocab_size {} at offset {}, the manifest says {}", name, h.vocab_size,
                     ShardLayout::kVocabSize, expect->vocab_size);
    if (h.split != expect->split)
      return corrupt("token shard '{}' has split {} at offset {}, the manifest lists it under split {}", name, h.split,
                     ShardLayout::kSplit, expect->split);
    if (h.shard_index != expect->shard_index)
      return corrupt("token shard '{}' has shard_index {} at offset {}, the manifest says {}", name, h.shard_index,
                     ShardLayout::kShardIndex, expect->shard_index);
    if (h.dtype_bytes != expect->dtype_bytes)
      return corrupt("token shard '{}' has dtype_bytes {} at offset {}, the manifest says {}", name, h.dtype_bytes,
                     ShardLayout::kDtypeBytes, expect->dtype_bytes);
  }
  const uint64_t payload = s.size() - kShardHeaderBytes;
  if (h.num_tokens > payload / h.dtype_bytes)
    return corrupt(
        "token shard '{}' is truncated: its header says num_tokens {} (offset {}), which needs {} bytes "
        "after the header, but the file ends at offset {}",
        name, h.num_tokens, ShardLayout::kNumTokens,
        h.num_tokens > UINT64_MAX / h.dtype_bytes ? std::string("more than 2^64")
                                                  : std::to_string(h.num_tokens * h.dtype_bytes),
        s.size());
  if (payload != h.num_tokens * h.dtype_bytes)
    return corrupt("token shard '{}' has {} trailing bytes from offset {} after its {} tokens", name,
                   payload - h.num_tokens * h.dtype_bytes, kShardHeaderBytes + h.num_tokens * h.dtype_bytes,
                   h.num_tokens);
  uint64_t docs = 0;
  const size_t base = out ? out->size() : 0;
  if (out) out->resize(base + h.num_tokens);
  for (uint64_t i = 0; i < h.num_tokens; ++i) {
    const size_t off = kShardHeaderBytes + i * h.dtype_bytes;
    const uint32_t t = h.dtype_bytes == 2 ? get_le<uint16_t>(s, off) : get_le<uint32_t>(s, off);
    if (t >= h.vocab_size)
      return corrupt("token shard '{}' has token id {} >= vocab_size {} at byte offset {} (token {})", name, t,
                     h.vocab_size, off, i);
    if (t == eot_id) ++docs;
    if (out) (*out)[base + i] = t;
  }
  if (docs != h.num_documents)
    return corrupt("token shard '{}' says num_documents {} at offset {} but holds {} end-of-document tokens (id {})",
                   name, h.num_documents, ShardLayout::kNumDocuments, docs, eot_id);
  return h;
}

}  // namespace sp::data

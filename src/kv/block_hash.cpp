// Chained SHA-256 block keys (see block_hash.h for the exact byte encodings).
#include "kv/block_hash.h"

#include <openssl/sha.h>

#include <vector>

namespace triad::kv {
namespace {

constexpr char kRootTag[] = "triad.kv.root";  // written with its terminating NUL
constexpr char kBlockTag[] = "triad.kv.block";

void put_u64le(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

BlockHash sha256(const std::vector<uint8_t>& bytes) {
  BlockHash h;
  SHA256(bytes.data(), bytes.size(), h.data());
  return h;
}

}  // namespace

BlockHash root_hash(std::string_view cache_namespace, std::string_view cache_salt) {
  std::vector<uint8_t> bytes;
  bytes.reserve(sizeof kRootTag + 16 + cache_namespace.size() + cache_salt.size());
  put_bytes(bytes, kRootTag, sizeof kRootTag);
  put_u64le(bytes, cache_namespace.size());
  put_bytes(bytes, cache_namespace.data(), cache_namespace.size());
  put_u64le(bytes, cache_salt.size());
  put_bytes(bytes, cache_salt.data(), cache_salt.size());
  return sha256(bytes);
}

BlockHash block_hash(const BlockHash& parent, std::span<const int32_t> tokens) {
  std::vector<uint8_t> bytes;
  bytes.reserve(sizeof kBlockTag + parent.size() + 8 + 4 * tokens.size());
  put_bytes(bytes, kBlockTag, sizeof kBlockTag);
  put_bytes(bytes, parent.data(), parent.size());
  put_u64le(bytes, tokens.size());
  for (int32_t t : tokens) {
    const auto u = static_cast<uint32_t>(t);
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(u >> (8 * i)));
  }
  return sha256(bytes);
}

}  // namespace triad::kv

// Prefix-cache keys: chained SHA-256 hashes of full KV blocks.
//
// A block's key names the whole token prefix up to its end, not just its own tokens: it is the
// hash of its parent block's key followed by its token ids, and the first block's parent is a
// root key derived from the cache namespace (model identity, KV dtypes) and the request's cache
// salt. Byte encodings (every input is either fixed-size or length-prefixed, and the two kinds
// of input start with different tags, so no two different inputs encode to the same bytes):
//
//   root_hash(ns, salt)      = SHA-256("triad.kv.root\0"  || u64le(|ns|) || ns
//                                                         || u64le(|salt|) || salt)
//   block_hash(parent, toks) = SHA-256("triad.kv.block\0" || parent (32 bytes)
//                                                         || u64le(|toks|) || i32le(toks[0]) ...)
//
// Thread-safety: the functions are pure and may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "kv/kv_cache_manager.h"

namespace triad::kv {

// Key of the (empty) prefix that every sequence of one namespace and salt starts from.
BlockHash root_hash(std::string_view cache_namespace, std::string_view cache_salt);

// Key of the block holding `tokens` whose preceding prefix has key `parent`.
BlockHash block_hash(const BlockHash& parent, std::span<const int32_t> tokens);

// Hash functor for unordered containers: the digest is uniformly distributed, so its first
// eight bytes are already a good bucket hash.
struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept {
    uint64_t v;
    std::memcpy(&v, h.data(), sizeof v);
    return static_cast<size_t>(v);
  }
};

}  // namespace triad::kv

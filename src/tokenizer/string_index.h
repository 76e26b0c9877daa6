// StringIndex: an open-addressing hash map from byte strings to int32 ids, for the vocabulary
// and merge lookups on the tokenizers' hot paths (internal to the tokenizer module).
//
// Properties:
// - Keys are views: the caller keeps the bytes alive and unchanged for the index's lifetime.
// - Linear probing over a power-of-two table of 8-byte slots kept at most half full; a slot
//   holds half of the key's hash, so a lookup touches the key bytes only on a likely match.
// - insert() keeps the first value for a repeated key and reports the existing one.
// Thread-safety: find() is safe concurrently once building is done; building is not.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace triad::tok {

inline uint64_t hash_bytes(std::string_view s) {
  const char* p = s.data();
  size_t n = s.size();
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(n) * 0xC2B2AE3D27D4EB4Full);
  while (n >= 8) {
    uint64_t k;
    std::memcpy(&k, p, 8);
    h ^= k * 0xBF58476D1CE4E5B9ull;
    h = ((h << 27) | (h >> 37)) * 0x94D049BB133111EBull;
    p += 8;
    n -= 8;
  }
  uint64_t k = 0;
  if (n > 0) std::memcpy(&k, p, n);
  h ^= k * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

class StringIndex {
 public:
  void reserve(size_t n) {
    entries_.reserve(n);
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }

  // Maps key -> value unless the key is present; returns -1 when inserted, else the value
  // already there.
  int32_t insert(std::string_view key, int32_t value) {
    if (2 * (entries_.size() + 1) > slots_.size()) rehash(slots_.empty() ? 16 : 2 * slots_.size());
    const uint64_t h = hash_bytes(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.entry < 0) {
        s = {tag, static_cast<int32_t>(entries_.size())};
        entries_.push_back({key.data(), key.size(), h, value});
        return -1;
      }
      const Entry& e = entries_[s.entry];
      if (s.tag == tag && e.len == key.size() && std::memcmp(e.data, key.data(), key.size()) == 0) return e.value;
    }
  }

  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash_bytes(key);
    const auto tag = static_cast<uint32_t>(h >> 32);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.entry < 0) return -1;
      if (s.tag != tag) continue;
      const Entry& e = entries_[s.entry];
      if (e.len == key.size() && std::memcmp(e.data, key.data(), key.size()) == 0) return e.value;
    }
  }

  size_t size() const { return entries_.size(); }

 private:
  struct Slot {  // 8 bytes: the table stays small and cache-friendly
    uint32_t tag;   // high half of the hash
    int32_t entry;  // index into entries_, -1: empty
  };
  struct Entry {
    const char* data;
    size_t len;
    uint64_t hash;
    int32_t value;
  };

  void rehash(size_t cap) {
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    for (size_t k = 0; k < entries_.size(); ++k) {
      size_t i = entries_[k].hash & mask_;
      while (slots_[i].entry >= 0) i = (i + 1) & mask_;
      slots_[i] = {static_cast<uint32_t>(entries_[k].hash >> 32), static_cast<int32_t>(k)};
    }
  }

  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  size_t mask_ = 0;
};

}  // namespace triad::tok

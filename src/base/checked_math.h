// Overflow-safe arithmetic for sizes derived from untrusted input.
#pragma once

#include <cstdint>
#include <optional>

namespace triad {

// Returns a + b, or nullopt when it would overflow uint64_t.
inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Returns a * b, or nullopt when it would overflow uint64_t.
inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace triad

// Raw Unicode tables generated into unicode_tables.cpp by gen_unicode_tables.py (internal to the
// tokenizer module; use the lookups in unicode.h instead).
// Properties: each table is sorted by codepoint. Thread-safety: immutable data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace triad::tok::tables {

struct FlagRange {  // codepoints [start, next range's start) share `flags` (kCp* bits)
  uint32_t start;
  uint8_t flags;
};
struct CpPair {
  uint32_t from;
  uint32_t to;
};
struct NfdRange {  // every codepoint in [first, last] decomposes to `base` + marks
  uint32_t first;
  uint32_t last;
  uint32_t base;
};

extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangesCount;
extern const CpPair kLowerMap[];
extern const size_t kLowerMapCount;
extern const NfdRange kNfdRanges[];
extern const size_t kNfdRangesCount;

}  // namespace triad::tok::tables

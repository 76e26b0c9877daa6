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
struct NfdEntry {  // `cp` decomposes (NFD, canonically ordered) to kNfdCps[offset, offset + len)
  uint32_t cp;
  uint16_t offset;
  uint16_t len;
};
struct CpRange {  // [first, last]
  uint32_t first;
  uint32_t last;
};

extern const FlagRange kFlagRanges[];
extern const size_t kFlagRangesCount;
extern const CpPair kLowerMap[];
extern const size_t kLowerMapCount;
extern const NfdEntry kNfdMap[];
extern const size_t kNfdMapCount;
extern const uint32_t kNfdCps[];
extern const size_t kNfdCpsCount;
extern const CpRange kMnRanges[];
extern const size_t kMnRangesCount;

}  // namespace triad::tok::tables

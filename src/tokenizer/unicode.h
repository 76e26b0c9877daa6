// Unicode helpers for the tokenizers: UTF-8 decoding/encoding, codepoint classes, lowercase,
// canonical decomposition and nonspacing-mark lookups (tables generated from Unicode 14 in
// unicode_tables.cpp), and the GPT-2 byte-level BPE byte <-> codepoint mapping.
//
// Properties:
// - utf8_decode() never throws: each byte that does not start a well-formed sequence (bad lead,
//   truncated, overlong, surrogate, > U+10FFFF) yields U+FFFD and consumes exactly one byte,
//   which is how llama.cpp replaces invalid input.
// - sanitize_utf8() returns text that is valid UTF-8 (invalid bytes become U+FFFD), as PCRE2 in
//   UTF mode requires.
// - Codepoint classes follow llama.cpp's flags: the general-category group (N, L, Z, M, P, S,
//   C; unassigned codepoints count as C) plus the White_Space property as a separate bit.
// Thread-safety: all functions are pure; the tables are immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace triad::tok {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Codepoint class bits (as stored in the generated table).
constexpr uint8_t kCpNumber = 0x01;       // \p{N}
constexpr uint8_t kCpLetter = 0x02;       // \p{L}
constexpr uint8_t kCpSeparator = 0x04;    // \p{Z}
constexpr uint8_t kCpMark = 0x08;         // \p{M}
constexpr uint8_t kCpPunctuation = 0x10;  // \p{P}
constexpr uint8_t kCpSymbol = 0x20;       // \p{S}
constexpr uint8_t kCpControl = 0x40;      // \p{C}
constexpr uint8_t kCpWhitespace = 0x80;   // White_Space property

uint8_t cp_flags(uint32_t cp);
// Simple lowercase mapping (first codepoint of the full mapping); identity when none.
uint32_t cp_lower(uint32_t cp);
// Appends the canonical decomposition (NFD) of `cp` to `out`: itself when it has none, Hangul
// syllables into their jamo. (Each codepoint alone: marks of neighbouring codepoints are not
// reordered across it by combining class.)
void cp_nfd_append(uint32_t cp, std::vector<uint32_t>& out);
// General category Mn (nonspacing mark), what accent stripping removes after NFD.
bool cp_is_nonspacing_mark(uint32_t cp);

// Byte length of a UTF-8 sequence judged by its first byte alone (1 for continuation bytes),
// the grouping llama.cpp's SentencePiece and BPE merges use.
inline size_t utf8_len_from_lead(unsigned char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

// Decodes one codepoint at s[pos]; advances pos (by 1 on an invalid sequence, returning U+FFFD).
uint32_t utf8_decode(std::string_view s, size_t& pos);
std::vector<uint32_t> utf8_to_cps(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);  // cp must be <= 0x10FFFF
std::string sanitize_utf8(std::string_view s);

enum class Utf8Seq { kValid, kIncomplete, kInvalid };
// Classifies the sequence starting at s[pos] (pos < s.size()) and sets `len`: kValid with the
// sequence's length; kIncomplete when `s` ends inside a sequence that may still become valid
// (len = bytes present); kInvalid with the length of the maximal ill-formed subpart, which a
// decoder replaces by one U+FFFD (Unicode's "maximal subpart" practice).
Utf8Seq utf8_classify(std::string_view s, size_t pos, size_t& len);

// GPT-2 byte-level mapping: every byte maps to a printable codepoint (U+0021..U+0143).
uint32_t byte_to_cp(uint8_t b);
// The byte for a mapped codepoint, or -1 when `cp` is not in the mapping.
int cp_to_byte(uint32_t cp);
// Appends the UTF-8 of the mapped codepoint of every byte of `bytes`.
void byte_encode_append(std::string& out, std::string_view bytes);

}  // namespace triad::tok

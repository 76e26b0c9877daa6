// Unicode helpers for the tokenizers (see unicode.h).
// Thread-safety: pure functions over immutable tables; the byte map is a constexpr-built table.
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

#include "tokenizer/unicode_tables.h"

namespace triad::tok {

uint8_t cp_flags(uint32_t cp) {
  using tables::kFlagRanges;
  if (cp >= 0x110000) return kCpControl;
  // Last range whose start <= cp.
  const auto* end = kFlagRanges + tables::kFlagRangesCount;
  const auto* it = std::upper_bound(kFlagRanges, end, cp,
                                    [](uint32_t v, const tables::FlagRange& r) { return v < r.start; });
  return (it - 1)->flags;
}

uint32_t cp_lower(uint32_t cp) {
  using tables::kLowerMap;
  const auto* end = kLowerMap + tables::kLowerMapCount;
  const auto* it = std::lower_bound(kLowerMap, end, cp,
                                    [](const tables::CpPair& p, uint32_t v) { return p.from < v; });
  return (it != end && it->from == cp) ? it->to : cp;
}

void cp_nfd_append(uint32_t cp, std::vector<uint32_t>& out) {
  // Hangul syllables: L V (T) jamo (The Unicode Standard, 3.12).
  constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7, kVCount = 21, kTCount = 28,
                     kSCount = 11172;
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / (kVCount * kTCount));
    out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  using tables::kNfdMap;
  const auto* end = kNfdMap + tables::kNfdMapCount;
  const auto* it =
      std::lower_bound(kNfdMap, end, cp, [](const tables::NfdEntry& e, uint32_t v) { return e.cp < v; });
  if (it == end || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  out.insert(out.end(), tables::kNfdCps + it->offset, tables::kNfdCps + it->offset + it->len);
}

bool cp_is_nonspacing_mark(uint32_t cp) {
  using tables::kMnRanges;
  const auto* end = kMnRanges + tables::kMnRangesCount;
  const auto* it = std::upper_bound(kMnRanges, end, cp, [](uint32_t v, const tables::CpRange& r) { return v < r.first; });
  return it != kMnRanges && cp <= (it - 1)->last;
}

Utf8Seq utf8_classify(std::string_view s, size_t pos, size_t& len) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    len = 1;
    return Utf8Seq::kValid;
  }
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlongs
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    len = 1;  // continuation byte, C0/C1 or F5..FF
    return Utf8Seq::kInvalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= s.size()) {
      len = i;
      return Utf8Seq::kIncomplete;
    }
    const auto b = static_cast<unsigned char>(s[pos + i]);
    const unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      len = i;
      return Utf8Seq::kInvalid;
    }
  }
  len = need;
  return Utf8Seq::kValid;
}

uint32_t utf8_decode(std::string_view s, size_t& pos) {
  size_t len = 0;
  if (utf8_classify(s, pos, len) != Utf8Seq::kValid) {
    ++pos;
    return kReplacementChar;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + pos);
  uint32_t cp;
  switch (len) {
    case 1: cp = p[0]; break;
    case 2: cp = (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
    case 3: cp = (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
    default:
      cp = (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
           (p[3] & 0x3F);
      break;
  }
  pos += len;
  return cp;
}

std::vector<uint32_t> utf8_to_cps(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(utf8_decode(s, pos));
  return out;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 0;
    if (utf8_classify(s, pos, len) == Utf8Seq::kValid) {
      out.append(s.data() + pos, len);
      pos += len;
    } else {
      utf8_append(out, kReplacementChar);
      ++pos;
    }
  }
  return out;
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100.. in byte order.
struct ByteMap {
  std::array<uint16_t, 256> to_cp{};
  std::array<int16_t, 0x144> to_byte{};
  constexpr ByteMap() {
    for (auto& v : to_byte) v = -1;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = static_cast<uint16_t>(printable ? b : 256 + n++);
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
constexpr ByteMap kByteMap;

}  // namespace

uint32_t byte_to_cp(uint8_t b) { return kByteMap.to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < kByteMap.to_byte.size() ? kByteMap.to_byte[cp] : -1; }

void byte_encode_append(std::string& out, std::string_view bytes) {
  for (char c : bytes) utf8_append(out, byte_to_cp(static_cast<uint8_t>(c)));
}

}  // namespace triad::tok

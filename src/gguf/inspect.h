// Human-readable rendering of GGUF contents, for `triad gguf inspect` and for error messages.
//
// Properties:
// - Everything read from the file (keys, tensor names, string values) is untrusted: it is
//   rendered through quote_bytes(), which escapes control bytes and cuts long strings, so a
//   hostile file cannot inject terminal escape sequences or multi-megabyte lines.
// - describe_gguf() only reads the parsed GgufFile; it never touches tensor data.
// Thread-safety: pure functions of their arguments; safe to call concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gguf/gguf_file.h"

namespace triad::gguf {

// `s` between `quote` characters, with \<quote> \\ \n \r \t and \xNN escapes for other bytes
// below 0x20 and 0x7f (bytes >= 0x80 are passed through as UTF-8). When s is longer than
// max_bytes it is cut (at a UTF-8 character boundary) and "...(N bytes)" is appended after the
// closing quote. Error messages use single quotes, displayed values double quotes.
std::string quote_bytes(std::string_view s, size_t max_bytes = 256, char quote = '"');

// "u32", "string", "array<f32>", "array<array<string>>" ...: the type of a value, for display.
std::string value_type_desc(const Value& v);

// A report of the whole file: version, alignment, sizes, every metadata key with its type and
// value, a table of tensors (name, type, dims, offset, bytes) and totals per dtype. Long arrays
// and long strings are elided unless `full`.
std::string describe_gguf(const GgufFile& file, bool full);

}  // namespace triad::gguf

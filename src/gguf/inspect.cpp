// Human-readable rendering of GGUF contents: quote_bytes, value_type_desc, Value::to_string
// (declared in gguf_file.h, defined here with the other display code) and describe_gguf.
//
// Properties: output size is bounded by the number of keys and tensors (long strings and
// arrays are elided unless asked for in full); untrusted bytes are escaped.
// Thread-safety: pure functions; safe to call concurrently.
#include "gguf/inspect.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <limits>
#include <map>

#include "base/checked_math.h"
#include "base/error.h"

namespace triad::gguf {
namespace {

bool is_plain_name(std::string_view s) {
  if (s.empty() || s.size() > 200) return false;
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\') return false;
  return true;
}

// Keys and tensor names: shown bare when they are plain printable ASCII, else quoted.
std::string display_name(std::string_view s) { return is_plain_name(s) ? std::string(s) : quote_bytes(s, 120); }

std::string human_bytes(uint64_t n) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (n < 1024) return std::to_string(n) + " B";
  double v = static_cast<double>(n) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

template <typename F>
std::string shortest(F x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string pad(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string shape_str(const TensorInfo& t) {
  std::string s;
  for (int d = 0; d < t.n_dims; ++d) {
    if (d) s += " x ";
    s += std::to_string(t.ne[d]);
  }
  return t.n_dims == 0 ? std::string("scalar") : s;
}

// A string value for display: quoted, cut at 32 bytes per element shown (at least 64).
std::string string_display(const std::string& s, size_t max_elems) {
  const size_t limit = std::max<uint64_t>(64, checked_mul(max_elems, 32).value_or(UINT64_MAX));
  return quote_bytes(s, limit);
}

// Appends each part (strings and string literals) to `out`.
template <typename... Parts>
void app(std::string& out, const Parts&... parts) {
  (out.append(std::string_view(parts)), ...);
}

}  // namespace

std::string quote_bytes(std::string_view s, size_t max_bytes, char quote) {
  size_t n = std::min(s.size(), max_bytes);
  // Do not cut inside a UTF-8 sequence: back off over continuation bytes (at most 3).
  if (n < s.size())
    for (int k = 0; k < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++k) --n;
  std::string out;
  out.reserve(n + 2);
  out += quote;
  for (size_t k = 0; k < n; ++k) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == static_cast<unsigned char>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
  if (n < s.size()) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string value_type_desc(const Value& v) {
  if (v.type != ValueType::kArray) return std::string(value_type_name(v.type));
  // Nested arrays: describe the first element's element type (all elements share one type
  // tag but each inner array has its own element type).
  if (v.elem_type == ValueType::kArray) {
    // Used in error messages, so it must not throw: a Value whose storage disagrees with its
    // elem_type (only possible when built by hand) is described without its elements.
    try {
      if (v.array_size() > 0) return "array<" + value_type_desc(v.array_at(0)) + ">";
    } catch (const Error&) {
    }
    return "array<array>";
  }
  return "array<" + std::string(value_type_name(v.elem_type)) + ">";
}

std::string Value::to_string(size_t max_elems) const {
  switch (type) {
    case ValueType::kU8: case ValueType::kU16: case ValueType::kU32: case ValueType::kU64:
      return std::to_string(u);
    case ValueType::kI8: case ValueType::kI16: case ValueType::kI32: case ValueType::kI64:
      return std::to_string(i);
    case ValueType::kF32: return shortest(static_cast<float>(f));
    case ValueType::kF64: return shortest(f);
    case ValueType::kBool: return b ? "true" : "false";
    case ValueType::kString: return string_display(str, max_elems);
    case ValueType::kArray: {
      std::string s = "[";
      const size_t n = array_size();
      const size_t shown = std::min(n, max_elems);
      for (size_t k = 0; k < shown; ++k) {
        if (k) s += ", ";
        if (elem_type == ValueType::kString)
          s += string_display(string_at(k), max_elems);
        else if (elem_type == ValueType::kArray)
          s += array_at(k).to_string(max_elems);
        else
          s += element(k).to_string(max_elems);
      }
      if (shown < n) s += (shown ? ", ... (" : "... (") + std::to_string(n - shown) + " more)";
      return s + "]";
    }
  }
  return "?";
}

std::string describe_gguf(const GgufFile& file, bool full) {
  const size_t max_elems = full ? std::numeric_limits<size_t>::max() : 8;
  using std::to_string;
  std::string out;
  app(out, "GGUF file: ", file.path().empty() ? std::string("(in memory)") : display_name(file.path()), "\n");
  app(out, "  version      ", to_string(file.version()), "\n");
  app(out, "  file size    ", to_string(file.file_size()), " bytes (", human_bytes(file.file_size()), ")\n");
  app(out, "  alignment    ", to_string(file.alignment()), "\n");
  app(out, "  data offset  ", to_string(file.data_offset()), "\n");
  app(out, "  metadata     ", to_string(file.metadata().size()), " keys\n");
  app(out, "  tensors      ", to_string(file.tensors().size()), "\n");

  app(out, "\nMetadata:\n");
  size_t key_w = 3, type_w = 4;
  std::vector<std::string> keys, types;
  for (const auto& [key, v] : file.metadata()) {
    keys.push_back(display_name(key));
    std::string t = value_type_desc(v);
    if (v.type == ValueType::kArray) app(t, "[", to_string(v.array_size()), "]");
    types.push_back(std::move(t));
    key_w = std::max(key_w, std::min<size_t>(keys.back().size(), 48));
    type_w = std::max(type_w, std::min<size_t>(types.back().size(), 24));
  }
  app(out, "  ", pad("key", key_w), "  ", pad("type", type_w), "  value\n");
  for (size_t k = 0; k < keys.size(); ++k)
    app(out, "  ", pad(keys[k], key_w), "  ", pad(types[k], type_w), "  ",
        file.metadata()[k].second.to_string(max_elems), "\n");

  app(out, "\nTensors:\n");
  size_t name_w = 4, shape_w = 5;
  const size_t idx_w = to_string(file.tensors().size()).size();
  for (const TensorInfo& t : file.tensors()) {
    name_w = std::max(name_w, std::min<size_t>(display_name(t.name).size(), 48));
    shape_w = std::max(shape_w, shape_str(t).size());
  }
  app(out, "  ", pad("#", idx_w), "  ", pad("name", name_w), "  ", pad("type", 6), "  ", pad("shape", shape_w),
      "  ", pad("offset", 12), "  bytes\n");
  struct Total {
    uint64_t count = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, Total> totals;
  Total all;
  for (size_t k = 0; k < file.tensors().size(); ++k) {
    const TensorInfo& t = file.tensors()[k];
    const std::string type(dtype_name(t.type));
    app(out, "  ", pad(to_string(k), idx_w), "  ", pad(display_name(t.name), name_w), "  ", pad(type, 6), "  ",
        pad(shape_str(t), shape_w), "  ", pad(to_string(t.offset), 12), "  ", to_string(t.n_bytes), "\n");
    Total& tot = totals[type];
    for (Total* x : {&tot, &all}) {
      x->count += 1;
      x->elements += t.n_elements;  // no overflow: tensors lie inside the file and do not overlap
      x->bytes += t.n_bytes;
    }
  }

  app(out, "\nTotals by type:\n");
  auto total_line = [&](const std::string& name, const Total& t) {
    app(out, "  ", pad(name, 6), "  ", pad(to_string(t.count) + " tensors", 14), "  ",
        pad(to_string(t.elements) + " elements", 22), "  ", to_string(t.bytes), " bytes (", human_bytes(t.bytes),
        ")\n");
  };
  for (const auto& [name, t] : totals) total_line(name, t);
  total_line("all", all);
  return out;
}

}  // namespace triad::gguf

// In-memory GGUF v3 writer (see gguf_writer.h for the layout it produces).
//
// Properties: validates every input before storing it; serialization is deterministic (same
// inputs, same bytes); padding bytes are zero.
// Thread-safety: none (a writer is used from one thread).
#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "base/checked_math.h"
#include "base/error.h"
#include "gguf/inspect.h"

namespace triad::gguf {
namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kMaxKeyBytes = 65535;

std::string qn(std::string_view s) { return quote_bytes(s, 96, '\''); }

class Sink {
 public:
  explicit Sink(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {  // little-endian host
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void str(std::string_view s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    while (out_.size() % alignment != 0) out_.push_back(0);
  }

 private:
  std::vector<uint8_t>& out_;
};

void put_payload(Sink& s, const Value& v) {
  switch (v.type) {
    case ValueType::kU8: s.put(static_cast<uint8_t>(v.u)); break;
    case ValueType::kI8: s.put(static_cast<int8_t>(v.i)); break;
    case ValueType::kU16: s.put(static_cast<uint16_t>(v.u)); break;
    case ValueType::kI16: s.put(static_cast<int16_t>(v.i)); break;
    case ValueType::kU32: s.put(static_cast<uint32_t>(v.u)); break;
    case ValueType::kI32: s.put(static_cast<int32_t>(v.i)); break;
    case ValueType::kU64: s.put(v.u); break;
    case ValueType::kI64: s.put(v.i); break;
    case ValueType::kF32: s.put(static_cast<float>(v.f)); break;
    case ValueType::kF64: s.put(v.f); break;
    case ValueType::kBool: s.put(static_cast<uint8_t>(v.b ? 1 : 0)); break;
    case ValueType::kString: s.str(v.str); break;
    case ValueType::kArray: {
      const size_t n = v.array_size();
      s.put(static_cast<uint32_t>(v.elem_type));
      s.put(static_cast<uint64_t>(n));
      if (value_type_size(v.elem_type) != 0) {
        const std::vector<uint8_t>& bytes = v.packed_bytes();  // already the file's encoding
        s.bytes(bytes.data(), bytes.size());
      } else if (v.elem_type == ValueType::kString) {
        for (const std::string& e : v.strings()) s.str(e);
      } else {
        for (const Value& e : v.arrays()) put_payload(s, e);
      }
      break;
    }
  }
}

// Checks that v can be encoded: known types, integers in range of their type, array storage
// consistent with elem_type, nesting within kMaxArrayDepth.
void validate(const Value& v, std::string_view key, int depth) {
  if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(ValueType::kF64))
    fail("GgufWriter: key ", qn(key), ": unknown value type id ", static_cast<uint32_t>(v.type));
  if (!detail::scalar_fits(v))
    fail("GgufWriter: key ", qn(key), ": value ", v.to_string(), " does not fit in ", value_type_name(v.type));
  if (v.type != ValueType::kArray) return;
  if (depth + 1 > kMaxArrayDepth)
    fail("GgufWriter: key ", qn(key), ": arrays nested deeper than ", kMaxArrayDepth, " levels");
  if (static_cast<uint32_t>(v.elem_type) > static_cast<uint32_t>(ValueType::kF64))
    fail("GgufWriter: key ", qn(key), ": unknown array element type id ", static_cast<uint32_t>(v.elem_type));
  // The builders keep packed bytes, strings and nested arrays well-formed; what can still be
  // wrong is storage that disagrees with elem_type (changed by hand) and, inside, the same.
  size_t n = 0;
  try {
    n = v.array_size();
  } catch (const Error& e) {
    fail("GgufWriter: key ", qn(key), ": ", e.what());
  }
  if (v.elem_type != ValueType::kArray) return;
  for (size_t k = 0; k < n; ++k) {
    const Value& e = v.array_at(k);
    if (e.type != ValueType::kArray)  // not reachable through the builders; checked anyway
      fail("GgufWriter: key ", qn(key), ": array of arrays holds an element of type ", value_type_name(e.type));
    validate(e, key, depth + 1);
  }
}

Value scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("GgufWriter: alignment ", alignment, " is not a nonzero power of two");
  alignment_ = alignment;
  for (auto& [key, v] : kv_) {
    if (key == "general.alignment") {
      v = scalar(ValueType::kU32);
      v.u = alignment;
      return;
    }
  }
  Value v = scalar(ValueType::kU32);
  v.u = alignment;
  kv_.emplace_back("general.alignment", std::move(v));
}

void GgufWriter::add_value(std::string key, Value value) {
  if (key.empty()) fail("GgufWriter: empty metadata key");
  if (key.size() > kMaxKeyBytes) fail("GgufWriter: metadata key of ", key.size(), " bytes is too long");
  for (const auto& kv : kv_)
    if (kv.first == key) fail("GgufWriter: duplicate metadata key ", qn(key));
  validate(value, key, 0);
  if (key == "general.alignment") {
    // Honour it as the layout alignment, as a reader will.
    const bool is_int = value.is_integer();
    const int64_t a = is_int ? value.as_int() : 0;  // as_int throws on u64 > INT64_MAX
    if (!is_int || a <= 0 || a > static_cast<int64_t>(UINT32_MAX) || (a & (a - 1)) != 0)
      fail("GgufWriter: general.alignment must be a power of two that fits in u32, got ", value.to_string());
    alignment_ = static_cast<uint64_t>(a);
  }
  kv_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_string(std::string key, std::string_view value) {
  Value v = scalar(ValueType::kString);
  v.str = std::string(value);
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_u8(std::string key, uint8_t value) {
  Value v = scalar(ValueType::kU8);
  v.u = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_u32(std::string key, uint32_t value) {
  Value v = scalar(ValueType::kU32);
  v.u = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_i32(std::string key, int32_t value) {
  Value v = scalar(ValueType::kI32);
  v.i = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_u64(std::string key, uint64_t value) {
  Value v = scalar(ValueType::kU64);
  v.u = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_i64(std::string key, int64_t value) {
  Value v = scalar(ValueType::kI64);
  v.i = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_f32(std::string key, float value) {
  Value v = scalar(ValueType::kF32);
  v.f = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_f64(std::string key, double value) {
  Value v = scalar(ValueType::kF64);
  v.f = value;
  add_value(std::move(key), std::move(v));
}
void GgufWriter::add_bool(std::string key, bool value) {
  Value v = scalar(ValueType::kBool);
  v.b = value;
  add_value(std::move(key), std::move(v));
}

void GgufWriter::add_string_array(std::string key, const std::vector<std::string>& values) {
  add_value(std::move(key), Value::make_string_array(values));
}
void GgufWriter::add_f32_array(std::string key, const std::vector<float>& values) {
  add_value(std::move(key), Value::make_packed_array(ValueType::kF32, values.data(), values.size()));
}
void GgufWriter::add_u8_array(std::string key, const std::vector<uint8_t>& values) {
  add_value(std::move(key), Value::make_packed_array(ValueType::kU8, values.data(), values.size()));
}

void GgufWriter::add_i32_array(std::string key, const std::vector<int32_t>& values) {
  add_value(std::move(key), Value::make_packed_array(ValueType::kI32, values.data(), values.size()));
}

void GgufWriter::add_tensor(std::string name, DType type, const std::vector<int64_t>& dims,
                            const void* data, size_t size) {
  add_tensor_impl(std::move(name), type, dims, data, size, true);
}
void GgufWriter::add_tensor_ref(std::string name, DType type, const std::vector<int64_t>& dims,
                                const void* data, size_t size) {
  add_tensor_impl(std::move(name), type, dims, data, size, false);
}

void GgufWriter::add_tensor_producer(std::string name, DType type, const std::vector<int64_t>& dims,
                                     Producer produce) {
  if (!produce) fail("GgufWriter: tensor ", qn(name), ": empty producer");
  const auto tr = dtype_traits(static_cast<uint32_t>(type));
  if (!tr) fail("GgufWriter: tensor ", qn(name), ": unknown type id ", static_cast<uint32_t>(type));
  uint64_t n = 1;
  for (int64_t d : dims) {
    const auto p = d > 0 ? checked_mul(n, static_cast<uint64_t>(d)) : std::optional<uint64_t>(0);
    n = p ? *p : 0;
  }
  const uint64_t size = n / tr->block_size * tr->block_bytes;  // checked by add_tensor_impl
  add_tensor_impl(std::move(name), type, dims, nullptr, static_cast<size_t>(size), false,
                  std::move(produce));
}

const uint8_t* GgufWriter::tensor_bytes(const Tensor& t, std::vector<uint8_t>& scratch) const {
  if (!t.produce) return t.data;
  scratch.resize(static_cast<size_t>(t.size));
  t.produce(scratch.data());
  return scratch.data();
}

void GgufWriter::add_tensor_impl(std::string name, DType type, const std::vector<int64_t>& dims,
                                 const void* data, size_t size, bool copy, Producer produce) {
  const std::string tn = qn(name);
  if (name.empty()) fail("GgufWriter: empty tensor name");
  for (const Tensor& t : tensors_)
    if (t.name == name) fail("GgufWriter: duplicate tensor name ", tn);
  const auto tr = dtype_traits(static_cast<uint32_t>(type));
  if (!tr) fail("GgufWriter: tensor ", tn, ": unknown type id ", static_cast<uint32_t>(type));
  if (dims.empty() || dims.size() > static_cast<size_t>(kMaxDims))
    fail("GgufWriter: tensor ", tn, ": ", dims.size(), " dims (1 to ", kMaxDims, " allowed)");
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d <= 0) fail("GgufWriter: tensor ", tn, ": dimension ", d, " is not positive");
    const auto p = checked_mul(n, static_cast<uint64_t>(d));
    if (!p || *p > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("GgufWriter: tensor ", tn, ": element count overflows");
    n = *p;
  }
  if (static_cast<uint64_t>(dims[0]) % tr->block_size != 0)
    fail("GgufWriter: tensor ", tn, ": ne[0] = ", dims[0], " is not a multiple of the ", tr->name,
         " block size ", tr->block_size);
  const auto bytes = checked_mul(n / tr->block_size, tr->block_bytes);
  if (!bytes || *bytes != size)
    fail("GgufWriter: tensor ", tn, ": ", size, " bytes given, ", tr->name, " with these dims needs ",
         bytes ? std::to_string(*bytes) : std::string("more than 2^64"));
  if (size > 0 && data == nullptr && !produce) fail("GgufWriter: tensor ", tn, ": null data");
  Tensor t;
  t.produce = std::move(produce);
  t.name = std::move(name);
  t.type = type;
  t.dims = dims;
  t.size = size;
  if (copy) {
    const auto* b = static_cast<const uint8_t*>(data);
    t.owned.assign(b, b + size);
    t.data = t.owned.data();
  } else {
    t.data = static_cast<const uint8_t*>(data);
  }
  tensors_.push_back(std::move(t));
}

std::vector<uint8_t> GgufWriter::serialize_head() const {
  std::vector<uint8_t> out;
  Sink s(out);
  s.bytes("GGUF", 4);
  s.put<uint32_t>(kVersion);
  s.put<uint64_t>(tensors_.size());
  s.put<uint64_t>(kv_.size());
  for (const auto& [key, v] : kv_) {
    s.str(key);
    s.put(static_cast<uint32_t>(v.type));
    put_payload(s, v);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    s.str(t.name);
    s.put(static_cast<uint32_t>(t.dims.size()));
    for (int64_t d : t.dims) s.put(static_cast<uint64_t>(d));
    s.put(static_cast<uint32_t>(t.type));
    s.put(offset);
    offset += (t.size + alignment_ - 1) / alignment_ * alignment_;
  }
  s.pad_to(alignment_);
  return out;
}

std::vector<uint8_t> GgufWriter::serialize() const {
  std::vector<uint8_t> out = serialize_head();
  Sink s(out);
  std::vector<uint8_t> scratch;
  for (const Tensor& t : tensors_) {
    s.bytes(tensor_bytes(t, scratch), static_cast<size_t>(t.size));
    s.pad_to(alignment_);  // the head ends aligned, so file and data-section alignment agree
  }
  return out;
}

void GgufWriter::write_file(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail("GgufWriter: cannot create ", qn(tmp), ": ", std::strerror(errno));
  bool ok = true;
  auto write = [&](const void* p, size_t n) {
    if (ok && n > 0 && std::fwrite(p, 1, n, f) != n) ok = false;
  };
  const std::vector<uint8_t> head = serialize_head();
  write(head.data(), head.size());
  static const uint8_t kZeros[256] = {};
  std::vector<uint8_t> scratch;
  try {
    for (const Tensor& t : tensors_) {
      write(tensor_bytes(t, scratch), static_cast<size_t>(t.size));
      uint64_t padding = (alignment_ - t.size % alignment_) % alignment_;
      while (padding > 0) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(padding, sizeof kZeros));
        write(kZeros, n);
        padding -= n;
      }
      if (!ok) break;
    }
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  const int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) ok = false;
  if (!ok) {
    std::remove(tmp.c_str());
    fail("GgufWriter: writing ", qn(tmp), " failed: ", std::strerror(err ? err : EIO));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    fail("GgufWriter: cannot rename ", qn(tmp), " to ", qn(path), ": ", std::strerror(e));
  }
}

}  // namespace triad::gguf

// GGUF reader (versions 2 and 3): mapping, parsing and validation, plus the typed getters.
//
// Layout of a GGUF file (all little-endian):
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x (string key | u32 value type | value)
//   tensor_count x (string name | u32 n_dims | n_dims x u64 ne | u32 type | u64 offset)
//   padding to `general.alignment` (default 32) | data section (tensor offsets are relative to it)
// where a string is u64 length + bytes and an array is u32 element type + u64 count + elements.
//
// Properties: every count and length is compared with the bytes left in the file before
// anything is allocated or looped over (an array of n elements needs at least n times the
// smallest encoding of its element type), and every offset/size product uses checked
// arithmetic, so a small hostile file cannot cause a large allocation, a long loop, an
// out-of-bounds read or a crash; it throws triad::Error naming the offending field.
// The total number of metadata values is also capped (kMaxMetadataValues) because each one
// becomes an in-memory Value of ~100 bytes.
// Rules checked beyond the byte layout: versions 2..3 only (big-endian files are recognised and
// refused); non-empty unique keys of at most 65535 bytes; bool bytes 0 or 1; arrays nested at
// most kMaxArrayDepth deep; general.alignment an integer, nonzero power of two; non-empty unique
// tensor names; n_dims <= 4 (0 means a one-element scalar); every dim >= 1 and the element count
// <= INT64_MAX; known tensor type and ne[0] a multiple of its block size; offsets multiples of
// the alignment; each tensor's bytes inside the file and no two tensors overlapping.
// A mapped file that another process truncates while it is open can still fault (SIGBUS) on
// access; that is inherent to mmap and not guarded against.
// Thread-safety: a GgufFile is immutable after open()/from_bytes(); concurrent reads are safe.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <numeric>

#include "base/checked_math.h"
#include "base/error.h"
#include "gguf/inspect.h"

namespace triad::gguf {
namespace {

constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;          // GGUF spec: keys are at most 2^16-1 bytes
constexpr uint64_t kMaxMetadataValues = 1u << 24; // ~1.7 GB of Values at most; real files < 2M
// Smallest encodings, used to bound counts by the bytes left.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;  // key length, >= 1 key byte, type, u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 4 + 8;  // name len, name, n_dims, type, offset
constexpr size_t kNameInMessage = 96;             // untrusted names are cut to this in errors

bool is_signed_int(ValueType t) {
  return t == ValueType::kI8 || t == ValueType::kI16 || t == ValueType::kI32 || t == ValueType::kI64;
}

bool valid_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kF64); }

// Bytes of the smallest possible encoding of one value of type t (t valid).
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kString: return 8;      // length only (empty string)
    case ValueType::kArray: return 4 + 8;   // element type + count (empty array)
  }
  return 1;
}

std::string q(std::string_view s) { return quote_bytes(s, kNameInMessage, '\''); }

// Renders a count in a message; powers of two >= 2^20 also as "2^k" for readability.
std::string count_str(uint64_t n) {
  std::string s = std::to_string(n);
  if (n >= (1u << 20) && (n & (n - 1)) == 0) s += " (2^" + std::to_string(__builtin_ctzll(n)) + ")";
  return s;
}

struct Parsed {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<std::pair<std::string, Value>> kv;
  std::vector<TensorInfo> tensors;
};

class Parser {
 public:
  Parser(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  Parsed run() {
    Parsed out;
    parse_header(out);
    parse_metadata(out);
    parse_alignment(out);
    parse_tensor_infos(out);
    place_data(out);
    return out;
  }

 private:
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail_here(std::string_view field, const std::string& what) const {
    if (ctx_.empty()) fail("GGUF: ", field, ": ", what);
    fail("GGUF: ", ctx_, ": ", field, ": ", what);
  }

  [[noreturn]] void fail_ctx(const std::string& what) const {
    if (ctx_.empty()) fail("GGUF: ", what);
    fail("GGUF: ", ctx_, ": ", what);
  }

  // Returns a pointer to the next n bytes and advances, or throws naming `field`.
  const uint8_t* take(uint64_t n, std::string_view field) {
    if (n > left())
      fail_here(field, "unexpected end of file at offset " + std::to_string(pos_) + " (needs " +
                           std::to_string(n) + " bytes, " + std::to_string(left()) + " left)");
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  template <typename T>
  T read(std::string_view field) {
    T v;
    std::memcpy(&v, take(sizeof(T), field), sizeof(T));  // host is little-endian (x86-64)
    return v;
  }
  uint32_t u32(std::string_view field) { return read<uint32_t>(field); }
  uint64_t u64(std::string_view field) { return read<uint64_t>(field); }

  std::string string(std::string_view field) {
    const uint64_t len = u64(field);
    if (len > left())
      fail_here(field, "string length " + count_str(len) + " exceeds remaining bytes (" +
                           std::to_string(left()) + " left)");
    const uint8_t* p = take(len, field);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
  }

  void parse_header(Parsed& out) {
    if (size_ < 4) fail("GGUF: file too small for the header (", size_, " bytes)");
    const uint8_t* m = take(4, "magic");
    if (std::memcmp(m, "GGUF", 4) != 0)
      fail("GGUF: bad magic ", q(std::string_view(reinterpret_cast<const char*>(m), 4)),
           " (expected \"GGUF\"): not a GGUF file");
    const uint32_t version = u32("version");
    if (version < kMinVersion || version > kMaxVersion) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped >= kMinVersion && swapped <= kMaxVersion)
        fail("GGUF: big-endian GGUF files are not supported (version field reads ", version,
             " little-endian, ", swapped, " big-endian)");
      fail("GGUF: version ", version, " is not supported (only versions 2 and 3 are)");
    }
    out.version = version;
    tensor_count_ = u64("tensor count");
    kv_count_ = u64("metadata key count");
    if (kv_count_ > left() / kMinKvBytes)
      fail("GGUF: metadata key count ", count_str(kv_count_), " exceeds remaining bytes (",
           left(), " left, each key needs at least ", kMinKvBytes, ")");
    if (tensor_count_ > left() / kMinTensorInfoBytes)
      fail("GGUF: tensor count ", count_str(tensor_count_), " exceeds remaining bytes (", left(),
           " left, each tensor info needs at least ", kMinTensorInfoBytes, ")");
  }

  void parse_metadata(Parsed& out) {
    out.kv.reserve(static_cast<size_t>(kv_count_));
    std::map<std::string, size_t, std::less<>> seen;
    for (uint64_t k = 0; k < kv_count_; ++k) {
      ctx_ = "metadata key #" + std::to_string(k);
      std::string key = string("key");
      if (key.empty()) fail_here("key", "empty key");
      if (key.size() > kMaxKeyBytes)
        fail_here("key", "key of " + std::to_string(key.size()) + " bytes is longer than " +
                             std::to_string(kMaxKeyBytes));
      ctx_ += " " + q(key);
      if (auto it = seen.find(key); it != seen.end())
        fail_here("key", "duplicate key (first defined as key #" + std::to_string(it->second) + ")");
      const uint32_t type = u32("value type");
      if (!valid_value_type(type)) fail_here("value type", "unknown value type id " + std::to_string(type));
      Value v = value(static_cast<ValueType>(type), 0, "value");
      seen.emplace(key, static_cast<size_t>(k));
      out.kv.emplace_back(std::move(key), std::move(v));
    }
    ctx_.clear();
  }

  // Parses one value of type t; `depth` is the number of arrays it is nested in.
  Value value(ValueType t, int depth, std::string_view field) {
    if (++n_values_ > kMaxMetadataValues)
      fail_here(field, "more than " + std::to_string(kMaxMetadataValues) + " metadata values in the file");
    Value v;
    v.type = t;
    switch (t) {
      case ValueType::kU8: v.u = read<uint8_t>(field); break;
      case ValueType::kI8: v.i = read<int8_t>(field); break;
      case ValueType::kU16: v.u = read<uint16_t>(field); break;
      case ValueType::kI16: v.i = read<int16_t>(field); break;
      case ValueType::kU32: v.u = read<uint32_t>(field); break;
      case ValueType::kI32: v.i = read<int32_t>(field); break;
      case ValueType::kU64: v.u = read<uint64_t>(field); break;
      case ValueType::kI64: v.i = read<int64_t>(field); break;
      case ValueType::kF32: v.f = read<float>(field); break;
      case ValueType::kF64: v.f = read<double>(field); break;
      case ValueType::kBool: {
        const uint8_t b = read<uint8_t>(field);
        if (b > 1) fail_here(field, "bool byte is " + std::to_string(b) + " (must be 0 or 1)");
        v.b = b != 0;
        break;
      }
      case ValueType::kString: v.str = string(field); break;
      case ValueType::kArray: array(v, depth + 1); break;
    }
    return v;
  }

  // Parses the element type, count and elements of an array at nesting level `depth` (>= 1).
  void array(Value& v, int depth) {
    if (depth > kMaxArrayDepth)
      fail_here("array", "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    const uint32_t et = u32("array element type");
    if (!valid_value_type(et))
      fail_here("array element type", "unknown value type id " + std::to_string(et));
    v.elem_type = static_cast<ValueType>(et);
    const uint64_t n = u64("array count");
    const uint64_t min = min_encoded_size(v.elem_type);
    if (n > left() / min)
      fail_ctx("array count " + count_str(n) + " exceeds remaining bytes (" + std::to_string(left()) +
               " left, each " + std::string(value_type_name(v.elem_type)) + " element needs at least " +
               std::to_string(min) + ")");
    if (n > kMaxMetadataValues - std::min(n_values_, kMaxMetadataValues))
      fail_ctx("array count " + count_str(n) + " exceeds the limit of " + std::to_string(kMaxMetadataValues) +
               " metadata values per file");
    v.arr.reserve(static_cast<size_t>(n));
    for (uint64_t j = 0; j < n; ++j) v.arr.push_back(value(v.elem_type, depth, "array element"));
  }

  void parse_alignment(Parsed& out) {
    for (const auto& [key, v] : out.kv) {
      if (key != "general.alignment") continue;
      ctx_ = "metadata key 'general.alignment'";
      if (!v.is_integer())
        fail_here("value", "has type " + value_type_desc(v) + ", expected an unsigned integer");
      const bool is_signed = is_signed_int(v.type);
      const uint64_t a = is_signed ? (v.i > 0 ? static_cast<uint64_t>(v.i) : 0) : v.u;
      if (a == 0 || (a & (a - 1)) != 0)
        fail_here("value", "alignment " + v.to_string() + " is not a nonzero power of two");
      out.alignment = a;
      ctx_.clear();
    }
  }

  void parse_tensor_infos(Parsed& out) {
    // Re-check with the bytes actually left after the metadata.
    if (tensor_count_ > left() / kMinTensorInfoBytes)
      fail("GGUF: tensor count ", count_str(tensor_count_), " exceeds remaining bytes (", left(),
           " left after the metadata, each tensor info needs at least ", kMinTensorInfoBytes, ")");
    out.tensors.reserve(static_cast<size_t>(tensor_count_));
    std::map<std::string, size_t, std::less<>> seen;
    for (uint64_t k = 0; k < tensor_count_; ++k) {
      ctx_ = "tensor #" + std::to_string(k);
      TensorInfo t;
      t.name = string("name");
      if (t.name.empty()) fail_here("name", "empty tensor name");
      ctx_ = "tensor " + q(t.name);
      if (auto it = seen.find(t.name); it != seen.end())
        fail_here("name", "duplicate tensor name (first used by tensor #" + std::to_string(it->second) + ")");
      const uint32_t n_dims = u32("n_dims");
      if (n_dims > static_cast<uint32_t>(kMaxDims))
        fail_here("n_dims", std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) +
                                " are supported)");
      t.n_dims = static_cast<int>(n_dims);
      uint64_t n_elements = 1;
      for (uint32_t d = 0; d < n_dims; ++d) {
        const std::string field = "ne[" + std::to_string(d) + "]";
        const uint64_t ne = u64(field);
        if (ne == 0) fail_here(field, "dimension is 0");
        if (ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          fail_here(field, "dimension " + std::to_string(ne) + " does not fit in int64");
        const auto prod = checked_mul(n_elements, ne);
        if (!prod || *prod > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          fail_here(field, "element count overflows (dimension " + std::to_string(ne) +
                               " times the " + std::to_string(n_elements) + " elements before it)");
        n_elements = *prod;
        t.ne[d] = static_cast<int64_t>(ne);
      }
      t.n_elements = n_elements;
      const uint32_t type_id = u32("type");
      const auto tr = dtype_traits(type_id);
      if (!tr) fail_here("type", "unknown tensor type id " + std::to_string(type_id));
      t.type = static_cast<DType>(type_id);
      const uint64_t ne0 = static_cast<uint64_t>(t.ne[0]);
      if (ne0 % tr->block_size != 0)
        fail_here("ne[0]", std::to_string(ne0) + " is not a multiple of the " + std::string(tr->name) +
                               " block size " + std::to_string(tr->block_size));
      // n_elements / block_size blocks (ne0 is a multiple of block_size, so this is exact).
      const auto bytes = checked_mul(n_elements / tr->block_size, tr->block_bytes);
      if (!bytes) fail_here("type", "byte size overflows");
      t.n_bytes = *bytes;
      t.offset = u64("offset");
      seen.emplace(t.name, static_cast<size_t>(k));
      out.tensors.push_back(std::move(t));
    }
    ctx_.clear();
  }

  void place_data(Parsed& out) {
    const uint64_t end_of_infos = pos_;
    const auto padded = checked_add(end_of_infos, out.alignment - 1);
    if (!padded) fail("GGUF: data section offset overflows (alignment ", out.alignment, ")");
    uint64_t data_offset = *padded / out.alignment * out.alignment;
    if (data_offset > size_) {
      if (!out.tensors.empty())
        fail("GGUF: data section (offset ", data_offset, ") starts past end of file (size ", size_, ")");
      data_offset = size_;  // no tensors: a file may end right after its metadata
    }
    out.data_offset = data_offset;
    for (TensorInfo& t : out.tensors) {
      const std::string name = q(t.name);
      if (t.offset % out.alignment != 0)
        fail("GGUF: tensor ", name, ": offset ", t.offset, " is not a multiple of the alignment ",
             out.alignment);
      const auto start = checked_add(data_offset, t.offset);
      const auto end = start ? checked_add(*start, t.n_bytes) : std::nullopt;
      if (!end || *end > size_)
        fail("GGUF: tensor ", name, ": data [offset ", t.offset, ", ", t.n_bytes,
             " bytes] runs past end of file (size ", size_, ", data section at ", data_offset, ")");
      t.data = base_ + *start;
    }
    // Tensors must not share bytes (every writer lays them out one after another).
    std::vector<size_t> order(out.tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return out.tensors[a].offset < out.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); ++k) {
      const TensorInfo& a = out.tensors[order[k - 1]];
      const TensorInfo& b = out.tensors[order[k]];
      if (a.offset + a.n_bytes > b.offset)  // no overflow: both ranges were checked above
        fail("GGUF: tensors ", q(a.name), " [offset ", a.offset, ", ", a.n_bytes, " bytes] and ",
             q(b.name), " [offset ", b.offset, "] overlap in the data section");
    }
  }

  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t n_values_ = 0;
  std::string ctx_;  // "metadata key #3 'x'" / "tensor 'y'" for messages
};

std::string key_prefix(std::string_view key) {
  return key.empty() ? std::string("GGUF: value") : "GGUF: metadata key " + q(key);
}

int64_t int_of(const Value& v, std::string_view key) {
  if (!v.is_integer())
    fail(key_prefix(key), " has type ", value_type_desc(v), ", expected an integer");
  if (is_signed_int(v.type)) return v.i;
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail(key_prefix(key), " value ", v.u, " (", value_type_name(v.type), ") does not fit in int64");
  return static_cast<int64_t>(v.u);
}

double float_of(const Value& v, std::string_view key) {
  if (v.is_float()) return v.f;
  if (v.is_integer()) return is_signed_int(v.type) ? static_cast<double>(v.i) : static_cast<double>(v.u);
  fail(key_prefix(key), " has type ", value_type_desc(v), ", expected a number");
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "unknown";
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

int64_t Value::as_int() const { return int_of(*this, {}); }
double Value::as_float() const { return float_of(*this, {}); }

// ---- GgufFile ----

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("GGUF: cannot open ", q(path), ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("GGUF: cannot stat ", q(path), ": ", std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("GGUF: ", q(path), " is not a regular file");
  }
  if (st.st_size <= 0) {
    ::close(fd);
    fail("GGUF: ", q(path), " is empty");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file referenced
  if (p == MAP_FAILED) fail("GGUF: cannot map ", q(path), ": ", std::strerror(err));
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = static_cast<const uint8_t*>(p);
  f->size_ = size;
  f->mapped_ = true;
  f->path_ = path;
  try {
    f->parse();
  } catch (const Error& e) {
    fail(q(path), ": ", e.what());
  }
  return f;
}

std::unique_ptr<GgufFile> GgufFile::from_bytes(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  if (size > 0) f->owned_.assign(data, data + size);
  f->base_ = f->owned_.data();
  f->size_ = size;
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (mapped_ && base_ != nullptr) ::munmap(const_cast<uint8_t*>(base_), static_cast<size_t>(size_));
}

void GgufFile::parse() {
  Parsed p = Parser(base_, size_).run();
  version_ = p.version;
  alignment_ = p.alignment;
  data_offset_ = p.data_offset;
  kv_ = std::move(p.kv);
  tensors_ = std::move(p.tensors);
  for (size_t k = 0; k < kv_.size(); ++k) kv_index_.emplace(kv_[k].first, k);
  for (size_t k = 0; k < tensors_.size(); ++k) tensor_index_.emplace(tensors_[k].name, k);
}

const Value* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {
const Value& require(const GgufFile& f, std::string_view key) {
  const Value* v = f.find(key);
  if (v == nullptr) fail("GGUF: metadata key ", q(key), " is missing");
  return *v;
}
const std::string& string_of(const Value& v, std::string_view key) {
  if (v.type != ValueType::kString) fail(key_prefix(key), " has type ", value_type_desc(v), ", expected string");
  return v.str;
}
bool bool_of(const Value& v, std::string_view key) {
  if (v.type != ValueType::kBool) fail(key_prefix(key), " has type ", value_type_desc(v), ", expected bool");
  return v.b;
}
const std::vector<Value>& array_of(const Value& v, std::string_view key, bool (*elem_ok)(ValueType),
                                   const char* expected) {
  if (v.type != ValueType::kArray || !elem_ok(v.elem_type))
    fail(key_prefix(key), " has type ", value_type_desc(v), ", expected ", expected);
  return v.arr;
}
bool is_int_type(ValueType t) {
  Value v;
  v.type = t;
  return v.is_integer();
}
bool is_numeric_type(ValueType t) { return is_int_type(t) || t == ValueType::kF32 || t == ValueType::kF64; }
bool is_string_type(ValueType t) { return t == ValueType::kString; }
}  // namespace

std::string GgufFile::get_string(std::string_view key) const { return string_of(require(*this, key), key); }
int64_t GgufFile::get_int(std::string_view key) const { return int_of(require(*this, key), key); }
double GgufFile::get_float(std::string_view key) const { return float_of(require(*this, key), key); }
bool GgufFile::get_bool(std::string_view key) const { return bool_of(require(*this, key), key); }

std::string GgufFile::get_string(std::string_view key, const std::string& def) const {
  const Value* v = find(key);
  return v ? string_of(*v, key) : def;
}
int64_t GgufFile::get_int(std::string_view key, int64_t def) const {
  const Value* v = find(key);
  return v ? int_of(*v, key) : def;
}
double GgufFile::get_float(std::string_view key, double def) const {
  const Value* v = find(key);
  return v ? float_of(*v, key) : def;
}
bool GgufFile::get_bool(std::string_view key, bool def) const {
  const Value* v = find(key);
  return v ? bool_of(*v, key) : def;
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  std::vector<std::string> out;
  const auto& arr = array_of(*v, key, is_string_type, "array<string>");
  out.reserve(arr.size());
  for (const Value& e : arr) out.push_back(e.str);
  return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  std::vector<float> out;
  const auto& arr = array_of(*v, key, is_numeric_type, "an array of numbers");
  out.reserve(arr.size());
  for (const Value& e : arr) out.push_back(static_cast<float>(float_of(e, key)));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  std::vector<int64_t> out;
  const auto& arr = array_of(*v, key, is_int_type, "an array of integers");
  out.reserve(arr.size());
  for (const Value& e : arr) out.push_back(int_of(e, key));
  return out;
}

}  // namespace triad::gguf

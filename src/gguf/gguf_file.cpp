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
// Memory stays proportional to the file: numeric and bool arrays are copied packed (their
// bytes as they are), string arrays become one std::string per element (>= 8 file bytes for
// 32 bytes of memory), and only arrays of arrays hold full Values, at most kMaxNestedArrays
// per file (each needs >= 12 file bytes). Keys and tensor names are indexed by sorted index
// vectors rather than maps. So a small hostile file cannot make the reader allocate much more
// than the file's own size (measured in tests/unit/gguf_memory_test.cpp).
// Rules checked beyond the byte layout: versions 2..3 only (big-endian files are recognised and
// refused); non-empty unique keys of at most 65535 bytes; bool bytes 0 or 1; arrays nested at
// most kMaxArrayDepth deep, at most kMaxNestedArrays arrays inside arrays; general.alignment an
// integer, nonzero power of two; non-empty unique tensor names; n_dims <= 4 (0 means a
// one-element scalar); every dim >= 1 and the element count <= INT64_MAX; known tensor type and ne[0] a multiple of its block size; offsets multiples of
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
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "base/checked_math.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "gguf/inspect.h"

namespace triad::gguf {
namespace {

constexpr uint32_t kMinVersion = 2;
constexpr uint32_t kMaxVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxKeyBytes = 65535;          // GGUF spec: keys are at most 2^16-1 bytes
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
  if (t == ValueType::kString) return 8;     // length only (empty string)
  if (t == ValueType::kArray) return 4 + 8;  // element type + count (empty array)
  return value_type_size(t);
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
  std::vector<size_t> kv_sorted;  // indices into kv ordered by key
  std::vector<TensorInfo> tensors;
  std::vector<size_t> tensor_sorted;  // indices into tensors ordered by name
};

// Indices 0..n-1 of `items` ordered by name(item), equal names in file order (sorted by
// (name, index), which needs no buffer unlike std::stable_sort). Returns the sorted indices;
// when two names are equal, `dup` gets the (first, second) indices.
template <typename T, typename Name>
std::vector<size_t> sorted_index(const std::vector<T>& items, Name name,
                                 std::optional<std::pair<size_t, size_t>>& dup) {
  std::vector<size_t> order(items.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const int c = name(items[a]).compare(name(items[b]));
    return c != 0 ? c < 0 : a < b;
  });
  // Report the duplicate whose second occurrence comes first in the file.
  for (size_t k = 1; k < order.size(); ++k)
    if (name(items[order[k - 1]]) == name(items[order[k]]) && (!dup || order[k] < dup->second))
      dup = std::make_pair(order[k - 1], order[k]);
  return order;
}

// Binary search in an index built by sorted_index; nullptr when absent.
template <typename T, typename Name>
const T* find_sorted(const std::vector<T>& items, const std::vector<size_t>& order, std::string_view key,
                     Name name) {
  auto it = std::lower_bound(order.begin(), order.end(), key,
                             [&](size_t a, std::string_view k) { return std::string_view(name(items[a])) < k; });
  if (it == order.end() || std::string_view(name(items[*it])) != key) return nullptr;
  return &items[*it];
}

const std::string& kv_name(const std::pair<std::string, Value>& kv) { return kv.first; }
const std::string& tensor_name(const TensorInfo& t) { return t.name; }

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
    for (uint64_t k = 0; k < kv_count_; ++k) {
      ctx_ = "metadata key #" + std::to_string(k);
      std::string key = string("key");
      if (key.empty()) fail_here("key", "empty key");
      if (key.size() > kMaxKeyBytes)
        fail_here("key", "key of " + std::to_string(key.size()) + " bytes is longer than " +
                             std::to_string(kMaxKeyBytes));
      ctx_ += " " + q(key);
      const uint32_t type = u32("value type");
      if (!valid_value_type(type)) fail_here("value type", "unknown value type id " + std::to_string(type));
      Value v = value(static_cast<ValueType>(type), 0, "value");
      out.kv.emplace_back(std::move(key), std::move(v));
    }
    ctx_.clear();
    std::optional<std::pair<size_t, size_t>> dup;
    out.kv_sorted = sorted_index(out.kv, kv_name, dup);
    if (dup)
      fail("GGUF: metadata key #", dup->second, " ", q(out.kv[dup->second].first),
           ": key: duplicate key (first defined as key #", dup->first, ")");
  }

  // Parses one value of type t; `depth` is the number of arrays it is nested in.
  Value value(ValueType t, int depth, std::string_view field) {
    if (t == ValueType::kArray) return array(depth + 1);
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
      case ValueType::kArray: break;  // handled above
    }
    return v;
  }

  // Parses the element type, count and elements of an array at nesting level `depth` (>= 1).
  Value array(int depth) {
    if (depth > kMaxArrayDepth)
      fail_here("array", "arrays nested deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    const uint32_t et = u32("array element type");
    if (!valid_value_type(et))
      fail_here("array element type", "unknown value type id " + std::to_string(et));
    const auto elem = static_cast<ValueType>(et);
    const uint64_t n = u64("array count");
    const uint64_t min = min_encoded_size(elem);
    if (n > left() / min)
      fail_ctx("array count " + count_str(n) + " exceeds remaining bytes (" + std::to_string(left()) +
               " left, each " + std::string(value_type_name(elem)) + " element needs at least " +
               std::to_string(min) + ")");
    if (const size_t size = value_type_size(elem); size != 0) {
      // Numbers and bools: the elements' bytes, copied as they are (n * size <= left()).
      const uint8_t* p = take(n * size, "array element");
      if (elem == ValueType::kBool)
        for (uint64_t j = 0; j < n; ++j)
          if (p[j] > 1)
            fail_here("array element", "bool byte is " + std::to_string(p[j]) + " (must be 0 or 1) at element " +
                                           std::to_string(j));
      return Value::make_packed_array(elem, std::vector<uint8_t>(p, p + n * size));
    }
    if (elem == ValueType::kString) {
      std::vector<std::string> strs;
      strs.reserve(static_cast<size_t>(n));  // 32 bytes per element, each >= 8 bytes of file
      for (uint64_t j = 0; j < n; ++j) strs.push_back(string("array element"));
      return Value::make_string_array(std::move(strs));
    }
    // Arrays of arrays: each element is a full Value, so their number is capped.
    if (n > kMaxNestedArrays - n_nested_)
      fail_ctx("array of " + count_str(n) + " arrays brings the file's nested arrays past the limit of " +
               std::to_string(kMaxNestedArrays) + " (" + std::to_string(n_nested_) + " before it)");
    n_nested_ += n;
    std::vector<Value> arrs;
    arrs.reserve(static_cast<size_t>(n));
    for (uint64_t j = 0; j < n; ++j) arrs.push_back(array(depth + 1));
    return Value::make_array_of_arrays(std::move(arrs));
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
    for (uint64_t k = 0; k < tensor_count_; ++k) {
      ctx_ = "tensor #" + std::to_string(k);
      TensorInfo t;
      t.name = string("name");
      if (t.name.empty()) fail_here("name", "empty tensor name");
      ctx_ = "tensor " + q(t.name);
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
      out.tensors.push_back(std::move(t));
    }
    ctx_.clear();
    std::optional<std::pair<size_t, size_t>> dup;
    out.tensor_sorted = sorted_index(out.tensors, tensor_name, dup);
    if (dup)
      fail("GGUF: tensor ", q(out.tensors[dup->second].name), ": name: duplicate tensor name (first used by tensor #",
           dup->first, ")");
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
  uint64_t n_nested_ = 0;  // arrays inside arrays so far (<= kMaxNestedArrays)
  std::string ctx_;  // "metadata key #3 'x'" / "tensor 'y'" for messages
};

using detail::float_of;
using detail::int_of;
using detail::key_prefix;

}  // namespace

// ---- GgufFile ----

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto map = std::make_unique<MappedFile>(path, "GGUF", q(path));
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->base_ = map->data();
  f->size_ = map->size();
  f->map_ = std::move(map);
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

void GgufFile::release_pages(const TensorInfo& t) const { release_range(t.data, t.n_bytes); }

void GgufFile::release_range(const void* p, uint64_t n) const {
  if (!map_ || n == 0 || p == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  // Only the mapping's own pages, whatever the caller passed (heap memory must never be
  // dropped: MADV_DONTNEED would zero it).
  const uintptr_t lo = reinterpret_cast<uintptr_t>(map_->data()), hi = lo + map_->size();
  const uintptr_t b = std::max(reinterpret_cast<uintptr_t>(p), lo), e = std::min(reinterpret_cast<uintptr_t>(p) + n, hi);
  if (b >= e) return;
  const uintptr_t first = (b + page - 1) / page * page, last = e / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void GgufFile::prefetch(const std::function<void(uint64_t, uint64_t)>& progress) const {
  if (!map_ || data_offset_ >= size_) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t total = size_ - data_offset_;
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  volatile uint8_t sink = 0;
  for (uint64_t done = 0; done < total;) {
    const uint64_t n = std::min(kChunk, total - done);
    const uintptr_t b = reinterpret_cast<uintptr_t>(base_ + data_offset_ + done);
    const uintptr_t first = b / page * page;
    ::madvise(reinterpret_cast<void*>(first), b + n - first, MADV_WILLNEED);
    uint8_t acc = 0;
    for (uint64_t o = 0; o < n; o += page) acc ^= base_[data_offset_ + done + o];
    sink = sink ^ acc;
    done += n;
    if (progress) progress(done, total);
  }
}

GgufFile::~GgufFile() = default;

void GgufFile::parse() {
  Parsed p = Parser(base_, size_).run();
  version_ = p.version;
  alignment_ = p.alignment;
  data_offset_ = p.data_offset;
  kv_ = std::move(p.kv);
  kv_sorted_ = std::move(p.kv_sorted);
  tensors_ = std::move(p.tensors);
  tensor_sorted_ = std::move(p.tensor_sorted);
}

const Value* GgufFile::find(std::string_view key) const {
  const auto* kv = find_sorted(kv_, kv_sorted_, key, kv_name);
  return kv == nullptr ? nullptr : &kv->second;
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  return find_sorted(tensors_, tensor_sorted_, name, tensor_name);
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
// Checks that v is an array whose element type passes elem_ok, or throws naming the key.
void check_array(const Value& v, std::string_view key, bool (*elem_ok)(ValueType), const char* expected) {
  if (v.type != ValueType::kArray || !elem_ok(v.elem_type))
    fail(key_prefix(key), " has type ", value_type_desc(v), ", expected ", expected);
}
// f64 (or a large integer) to f32 without relying on out-of-range conversions: values beyond
// the float range become +-infinity, NaN stays NaN.
float narrow_to_float(double d) {
  if (std::isnan(d)) return std::numeric_limits<float>::quiet_NaN();
  if (d > std::numeric_limits<float>::max()) return std::numeric_limits<float>::infinity();
  if (d < -std::numeric_limits<float>::max()) return -std::numeric_limits<float>::infinity();
  return static_cast<float>(d);
}
bool is_numeric_type(ValueType t) { return is_integer_type(t) || is_float_type(t); }
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
  check_array(*v, key, is_string_type, "array<string>");
  return v->strings();
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  check_array(*v, key, is_numeric_type, "an array of numbers");
  std::vector<float> out(v->array_size());
  if (v->elem_type == ValueType::kF32) {  // the common case: the bytes are already floats
    if (!out.empty()) std::memcpy(out.data(), v->packed_bytes().data(), out.size() * sizeof(float));
    return out;
  }
  for (size_t k = 0; k < out.size(); ++k) out[k] = narrow_to_float(float_of(v->element(k), key));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return {};
  check_array(*v, key, is_integer_type, "an array of integers");
  std::vector<int64_t> out(v->array_size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = int_of(v->element(k), key);
  return out;
}

}  // namespace triad::gguf

// GGUF metadata values (see gguf_value.h): type helpers, scalar conversions, and the compact
// array storage with its element accessors and builders. Value::to_string lives in inspect.cpp
// with the other display code.
//
// Properties: every accessor checks the element type and index and throws triad::Error (never
// reads out of bounds); packed elements are decoded with memcpy (the host is little-endian, as
// the file is), so unaligned data is fine.
// Thread-safety: const members are safe to call concurrently; builders/append mutate one Value.
#include "gguf/gguf_value.h"

#include <cstring>
#include <limits>

#include "base/checked_math.h"
#include "base/error.h"
#include "gguf/inspect.h"

namespace triad::gguf {
namespace {

bool is_signed_int(ValueType t) {
  return t == ValueType::kI8 || t == ValueType::kI16 || t == ValueType::kI32 || t == ValueType::kI64;
}

bool valid_type(ValueType t) { return static_cast<uint32_t>(t) <= static_cast<uint32_t>(ValueType::kF64); }

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Decodes one packed element of fixed-size type t (value_type_size(t) bytes at p).
Value decode(const uint8_t* p, ValueType t) {
  Value v;
  v.type = t;
  switch (t) {
    case ValueType::kU8: v.u = load<uint8_t>(p); break;
    case ValueType::kI8: v.i = load<int8_t>(p); break;
    case ValueType::kU16: v.u = load<uint16_t>(p); break;
    case ValueType::kI16: v.i = load<int16_t>(p); break;
    case ValueType::kU32: v.u = load<uint32_t>(p); break;
    case ValueType::kI32: v.i = load<int32_t>(p); break;
    case ValueType::kU64: v.u = load<uint64_t>(p); break;
    case ValueType::kI64: v.i = load<int64_t>(p); break;
    case ValueType::kF32: v.f = load<float>(p); break;
    case ValueType::kF64: v.f = load<double>(p); break;
    case ValueType::kBool: v.b = p[0] != 0; break;
    case ValueType::kString: case ValueType::kArray: break;  // not fixed-size; never called
  }
  return v;
}

template <typename T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// Encodes scalar e (of fixed-size type, in range) into value_type_size(e.type) bytes at p.
void encode(uint8_t* p, const Value& e) {
  switch (e.type) {
    case ValueType::kU8: store(p, static_cast<uint8_t>(e.u)); break;
    case ValueType::kI8: store(p, static_cast<int8_t>(e.i)); break;
    case ValueType::kU16: store(p, static_cast<uint16_t>(e.u)); break;
    case ValueType::kI16: store(p, static_cast<int16_t>(e.i)); break;
    case ValueType::kU32: store(p, static_cast<uint32_t>(e.u)); break;
    case ValueType::kI32: store(p, static_cast<int32_t>(e.i)); break;
    case ValueType::kU64: store(p, e.u); break;
    case ValueType::kI64: store(p, e.i); break;
    case ValueType::kF32: store(p, static_cast<float>(e.f)); break;
    case ValueType::kF64: store(p, e.f); break;
    case ValueType::kBool: p[0] = e.b ? 1 : 0; break;
    case ValueType::kString: case ValueType::kArray: break;
  }
}

[[noreturn]] void wrong_elements(const Value& v, const char* expected) {
  fail("GGUF: value has type ", value_type_desc(v), ", expected ", expected);
}

const char* storage_kind(size_t index) {
  switch (index) {
    case 1: return "packed numeric";
    case 2: return "string";
    case 3: return "array";
    default: return "no";
  }
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

size_t value_type_size(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kBool: return 1;
    case ValueType::kU16: case ValueType::kI16: return 2;
    case ValueType::kU32: case ValueType::kI32: case ValueType::kF32: return 4;
    case ValueType::kU64: case ValueType::kI64: case ValueType::kF64: return 8;
    case ValueType::kString: case ValueType::kArray: return 0;
  }
  return 0;
}

bool is_integer_type(ValueType t) {
  switch (t) {
    case ValueType::kU8: case ValueType::kI8: case ValueType::kU16: case ValueType::kI16:
    case ValueType::kU32: case ValueType::kI32: case ValueType::kU64: case ValueType::kI64:
      return true;
    default:
      return false;
  }
}

bool is_float_type(ValueType t) { return t == ValueType::kF32 || t == ValueType::kF64; }

namespace detail {

std::string key_prefix(std::string_view key) {
  return key.empty() ? std::string("GGUF: value") : "GGUF: metadata key " + quote_bytes(key, 96, '\'');
}

int64_t int_of(const Value& v, std::string_view key) {
  if (!v.is_integer()) fail(key_prefix(key), " has type ", value_type_desc(v), ", expected an integer");
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

bool scalar_fits(const Value& v) {
  switch (v.type) {
    case ValueType::kU8: return v.u <= UINT8_MAX;
    case ValueType::kU16: return v.u <= UINT16_MAX;
    case ValueType::kU32: return v.u <= UINT32_MAX;
    case ValueType::kI8: return v.i >= INT8_MIN && v.i <= INT8_MAX;
    case ValueType::kI16: return v.i >= INT16_MIN && v.i <= INT16_MAX;
    case ValueType::kI32: return v.i >= INT32_MIN && v.i <= INT32_MAX;
    default: return true;
  }
}

}  // namespace detail

int64_t Value::as_int() const { return detail::int_of(*this, {}); }
double Value::as_float() const { return detail::float_of(*this, {}); }

// ---- arrays: reading ----

void Value::check_storage() const {
  const size_t index = elems_.index();
  bool ok = true;
  switch (index) {
    case 1: {
      const size_t size = value_type_size(elem_type);
      ok = size != 0 && std::get<1>(elems_).size() % size == 0;
      break;
    }
    case 2: ok = elem_type == ValueType::kString; break;
    case 3: ok = elem_type == ValueType::kArray; break;
    default: break;
  }
  if (!ok)
    fail("GGUF: array with element type ", value_type_name(elem_type), " holds ", storage_kind(index),
         " elements (elem_type was changed after elements were added)");
}

size_t Value::array_size() const {
  if (type != ValueType::kArray) return 0;
  check_storage();
  switch (elems_.index()) {
    case 1: return std::get<1>(elems_).size() / value_type_size(elem_type);
    case 2: return std::get<2>(elems_).size();
    case 3: return std::get<3>(elems_).size();
    default: return 0;
  }
}

void Value::check_index(size_t k) const {
  const size_t n = array_size();
  if (k >= n) fail("GGUF: array index ", k, " is out of range (", n, " elements)");
}

Value Value::element(size_t k) const {
  if (type != ValueType::kArray) fail("GGUF: value has type ", value_type_desc(*this), ", expected an array");
  check_index(k);
  if (const size_t size = value_type_size(elem_type); size != 0)
    return decode(std::get<1>(elems_).data() + k * size, elem_type);
  if (elem_type == ValueType::kString) {
    Value v;
    v.type = ValueType::kString;
    v.str = std::get<2>(elems_)[k];
    return v;
  }
  return std::get<3>(elems_)[k];
}

int64_t Value::int_at(size_t k) const {
  if (type != ValueType::kArray || !is_integer_type(elem_type)) wrong_elements(*this, "an array of integers");
  check_index(k);
  return detail::int_of(element(k), {});
}

double Value::float_at(size_t k) const {
  if (type != ValueType::kArray || !(is_integer_type(elem_type) || is_float_type(elem_type)))
    wrong_elements(*this, "an array of numbers");
  check_index(k);
  return detail::float_of(element(k), {});
}

bool Value::bool_at(size_t k) const {
  if (type != ValueType::kArray || elem_type != ValueType::kBool) wrong_elements(*this, "array<bool>");
  check_index(k);
  return std::get<1>(elems_)[k] != 0;
}

const std::string& Value::string_at(size_t k) const {
  const std::vector<std::string>& s = strings();
  if (k >= s.size()) fail("GGUF: array index ", k, " is out of range (", s.size(), " elements)");
  return s[k];
}

const Value& Value::array_at(size_t k) const {
  const std::vector<Value>& a = arrays();
  if (k >= a.size()) fail("GGUF: array index ", k, " is out of range (", a.size(), " elements)");
  return a[k];
}

const std::vector<uint8_t>& Value::packed_bytes() const {
  static const std::vector<uint8_t> kEmpty;
  if (type != ValueType::kArray || value_type_size(elem_type) == 0)
    wrong_elements(*this, "an array of numbers or bools");
  check_storage();
  return elems_.index() == 1 ? std::get<1>(elems_) : kEmpty;
}

const std::vector<std::string>& Value::strings() const {
  static const std::vector<std::string> kEmpty;
  if (type != ValueType::kArray || elem_type != ValueType::kString) wrong_elements(*this, "array<string>");
  check_storage();
  return elems_.index() == 2 ? std::get<2>(elems_) : kEmpty;
}

const std::vector<Value>& Value::arrays() const {
  static const std::vector<Value> kEmpty;
  if (type != ValueType::kArray || elem_type != ValueType::kArray) wrong_elements(*this, "an array of arrays");
  check_storage();
  return elems_.index() == 3 ? std::get<3>(elems_) : kEmpty;
}

// ---- arrays: building ----

Value Value::make_array(ValueType elem) {
  if (!valid_type(elem)) fail("GGUF: unknown array element type id ", static_cast<uint32_t>(elem));
  Value v;
  v.type = ValueType::kArray;
  v.elem_type = elem;
  return v;
}

Value Value::make_packed_array(ValueType elem, const void* data, size_t count) {
  const size_t size = value_type_size(elem);
  if (size == 0) fail("GGUF: packed arrays hold numbers or bools, not ", value_type_name(elem));
  const auto bytes = checked_mul(count, size);
  if (!bytes) fail("GGUF: packed array of ", count, " elements overflows");
  if (*bytes > 0 && data == nullptr) fail("GGUF: packed array with null data");
  const auto* p = static_cast<const uint8_t*>(data);
  return make_packed_array(elem, std::vector<uint8_t>(p, p + *bytes));
}

Value Value::make_packed_array(ValueType elem, std::vector<uint8_t> bytes) {
  const size_t size = value_type_size(elem);
  if (size == 0) fail("GGUF: packed arrays hold numbers or bools, not ", value_type_name(elem));
  if (bytes.size() % size != 0)
    fail("GGUF: packed array of ", value_type_name(elem), ": ", bytes.size(), " bytes is not a multiple of ", size);
  if (elem == ValueType::kBool)
    for (size_t k = 0; k < bytes.size(); ++k)
      if (bytes[k] > 1) fail("GGUF: array<bool> element ", k, ": bool byte is ", int{bytes[k]}, " (must be 0 or 1)");
  Value v = make_array(elem);
  v.elems_ = std::move(bytes);
  return v;
}

Value Value::make_string_array(std::vector<std::string> values) {
  Value v = make_array(ValueType::kString);
  v.elems_ = std::move(values);
  return v;
}

Value Value::make_array_of_arrays(std::vector<Value> values) {
  for (size_t k = 0; k < values.size(); ++k)
    if (values[k].type != ValueType::kArray)
      fail("GGUF: array of arrays: element ", k, " has type ", value_type_name(values[k].type));
  Value v = make_array(ValueType::kArray);
  v.elems_ = std::move(values);
  return v;
}

void Value::append(const Value& e) {
  if (type != ValueType::kArray) fail("GGUF: append to a value of type ", value_type_name(type), ", not an array");
  if (e.type != elem_type)
    fail("GGUF: cannot append a ", value_type_name(e.type), " to an array of ", value_type_name(elem_type));
  check_storage();
  if (const size_t size = value_type_size(elem_type); size != 0) {
    if (!detail::scalar_fits(e))
      fail("GGUF: cannot append ", e.to_string(), ": it does not fit in ", value_type_name(e.type));
    if (elems_.index() != 1) elems_.emplace<1>();
    auto& bytes = std::get<1>(elems_);
    bytes.resize(bytes.size() + size);
    encode(bytes.data() + bytes.size() - size, e);
  } else if (elem_type == ValueType::kString) {
    if (elems_.index() != 2) elems_.emplace<2>();
    std::get<2>(elems_).push_back(e.str);
  } else if (elem_type == ValueType::kArray) {
    if (elems_.index() != 3) elems_.emplace<3>();
    std::get<3>(elems_).push_back(e);
  } else {
    fail("GGUF: unknown array element type id ", static_cast<uint32_t>(elem_type));
  }
}

}  // namespace triad::gguf

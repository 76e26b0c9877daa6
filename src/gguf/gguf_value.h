// GGUF metadata values: ValueType and Value (included by gguf_file.h; use that header).
//
// Properties:
// - A scalar keeps its value in the public field that matches its type: unsigned integers in
//   `u`, signed in `i`, f32/f64 in `f`, bool in `b`, string in `str`.
// - An array (type == kArray) has `elem_type` and stores its elements compactly, so that the
//   memory a parsed file takes stays proportional to its bytes:
//     numbers and bools   packed: count x element size raw little-endian bytes (as in the file)
//     strings             one std::string per element
//     arrays (nested)     one full Value per element (each costs sizeof(Value), ~104 bytes;
//                         the reader caps how many a file may hold, see kMaxNestedArrays)
//   The storage is private; read it with array_size() and the element accessors below, build
//   arrays with the make_*/append helpers. A default Value with type = kArray is an empty array
//   of elem_type. Changing `elem_type` of a non-empty array by hand makes it inconsistent: the
//   accessors and GgufWriter then throw triad::Error instead of misreading it.
// - Values copy deeply (nested arrays included); copies are independent of any GgufFile.
// Thread-safety: const member functions are safe to call concurrently; mutation is not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace triad::gguf {

enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
std::string_view value_type_name(ValueType t);
// Bytes of one element of a fixed-size type (integers, floats, bool: 1, 2, 4 or 8); 0 for
// kString, kArray and unknown ids.
size_t value_type_size(ValueType t);
bool is_integer_type(ValueType t);
bool is_float_type(ValueType t);  // kF32, kF64

constexpr int kMaxArrayDepth = 8;  // nesting limit for arrays of arrays

struct Value {
  ValueType type = ValueType::kU8;
  ValueType elem_type = ValueType::kU8;  // arrays only (next to `type` to keep Value small)
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string str;

  bool is_integer() const { return is_integer_type(type); }
  bool is_float() const { return is_float_type(type); }
  bool is_array() const { return type == ValueType::kArray; }
  // Integer value of any integer type, or throws naming the type mismatch.
  int64_t as_int() const;
  // Float value of a float or integer type.
  double as_float() const;
  // Short human-readable rendering (long arrays are elided), for `triad gguf inspect`.
  std::string to_string(size_t max_elems = 8) const;

  // ---- arrays: reading ----
  // Number of elements of an array; 0 for a scalar.
  size_t array_size() const;
  bool array_empty() const { return array_size() == 0; }
  // Element k as a standalone scalar Value of type elem_type (a deep copy for nested arrays;
  // prefer array_at() there). Throws triad::Error when this is not an array or k is out of range.
  Value element(size_t k) const;
  // Typed element access; each throws triad::Error when this is not an array whose elements fit
  // the request, or k >= array_size().
  int64_t int_at(size_t k) const;      // integer elements (u64 above INT64_MAX throws)
  double float_at(size_t k) const;     // integer or float elements
  bool bool_at(size_t k) const;        // bool elements
  const std::string& string_at(size_t k) const;  // string elements
  const Value& array_at(size_t k) const;          // array elements (nested arrays)
  // Whole-array views (each throws on the wrong element type; an empty array gives an empty view).
  // packed_bytes: numeric/bool arrays, array_size() * value_type_size(elem_type) raw
  // little-endian bytes, exactly as stored in the file.
  const std::vector<uint8_t>& packed_bytes() const;
  const std::vector<std::string>& strings() const;  // array<string>
  const std::vector<Value>& arrays() const;          // array<array>

  // ---- arrays: building ----
  // An empty array of elements of type `elem`.
  static Value make_array(ValueType elem);
  // An array of a fixed-size type from `count` elements laid out as in the file (little-endian,
  // value_type_size(elem) bytes each). Bool bytes must be 0 or 1. Throws triad::Error otherwise.
  static Value make_packed_array(ValueType elem, const void* data, size_t count);
  // Same, taking ownership of the bytes (their size must be a multiple of the element size).
  static Value make_packed_array(ValueType elem, std::vector<uint8_t> bytes);
  static Value make_string_array(std::vector<std::string> values);
  // An array of arrays; every element must have type kArray.
  static Value make_array_of_arrays(std::vector<Value> values);
  // Appends one element to an array: `e.type` must equal elem_type (a scalar in range of its type,
  // or an array when elem_type is kArray). Throws triad::Error otherwise.
  void append(const Value& e);

 private:
  // Empty (monostate) or exactly the alternative that elem_type selects.
  using Storage = std::variant<std::monostate, std::vector<uint8_t>, std::vector<std::string>, std::vector<Value>>;
  Storage elems_;

  void check_index(size_t k) const;
  // Throws unless the held storage agrees with elem_type.
  void check_storage() const;
};

namespace detail {
// Conversions used by GgufFile's getters; a non-empty `key` is named in error messages.
int64_t int_of(const Value& v, std::string_view key);
double float_of(const Value& v, std::string_view key);
std::string key_prefix(std::string_view key);  // "GGUF: metadata key 'k'" or "GGUF: value"
// Whether a fixed-size scalar's u/i field is within the range of its type (always true otherwise).
bool scalar_fits(const Value& v);
}  // namespace detail

}  // namespace triad::gguf

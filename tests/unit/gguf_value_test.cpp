// Tests of Value's compact array storage: the reader on hand-built arrays of every element
// type (expected values are the ones written into the image here), the element accessors and
// their errors, the builders, the typed array getters, and the writer round trip of packed
// arrays.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/inspect.h"
#include "gguf_test_image.h"

namespace triad::gguf {
namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR_HAS(stmt, part)                                  \
  do {                                                                \
    const std::string msg_ = error_of([&] { (void)(stmt); });         \
    EXPECT_NE(msg_.find(part), std::string::npos) << "got: " << msg_; \
  } while (0)

// One key per element type, values chosen at the edges of each type's range.
std::vector<uint8_t> all_array_types_image() {
  RawImage r;
  r.header(0, 13);
  r.array_kv("u8", 0, 3).u8(0).u8(255).u8(7);
  r.array_kv("i8", 1, 3).pod<int8_t>(-128).pod<int8_t>(127).pod<int8_t>(-1);
  r.array_kv("u16", 2, 2).pod<uint16_t>(65535).pod<uint16_t>(1);
  r.array_kv("i16", 3, 2).pod<int16_t>(-32768).pod<int16_t>(5);
  r.array_kv("u32", 4, 2).pod<uint32_t>(4294967295u).pod<uint32_t>(0);
  r.array_kv("i32", 5, 2).pod<int32_t>(std::numeric_limits<int32_t>::min()).pod<int32_t>(9);
  r.array_kv("f32", 6, 2).pod<float>(1.5f).pod<float>(-0.25f);
  r.array_kv("bool", 7, 3).u8(1).u8(0).u8(1);
  r.array_kv("str", 8, 3).str("one").str("").str("three\n");
  r.array_kv("u64", 10, 2).pod<uint64_t>(UINT64_MAX).pod<uint64_t>(3);
  r.array_kv("i64", 11, 2).pod<int64_t>(std::numeric_limits<int64_t>::min()).pod<int64_t>(4);
  r.array_kv("f64", 12, 2).pod<double>(1e300).pod<double>(-2.5);
  r.array_kv("nest", 9, 2).u32(5).u64(1).pod<int32_t>(-7).u32(8).u64(0);
  return r.b;
}

TEST(GgufValueArrays, ReaderDecodesEveryElementType) {
  const auto img = all_array_types_image();
  const auto f = GgufFile::from_bytes(img.data(), img.size());
  auto v = [&](const char* key) -> const Value& {
    const Value* p = f->find(key);
    if (p == nullptr) throw Error(std::string("missing ") + key);
    return *p;
  };
  EXPECT_EQ(v("u8").array_size(), 3u);
  EXPECT_EQ(v("u8").packed_bytes(), (std::vector<uint8_t>{0, 255, 7}));
  EXPECT_EQ(v("u8").element(1).type, ValueType::kU8);
  EXPECT_EQ(v("u8").element(1).u, 255u);
  EXPECT_EQ(v("i8").int_at(0), -128);
  EXPECT_EQ(v("i8").element(2).i, -1);
  EXPECT_EQ(v("u16").int_at(0), 65535);
  EXPECT_EQ(v("u16").packed_bytes().size(), 4u);
  EXPECT_EQ(v("i16").int_at(0), -32768);
  EXPECT_EQ(v("u32").int_at(0), 4294967295LL);
  EXPECT_EQ(v("i32").int_at(0), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(v("i32").float_at(1), 9.0);
  EXPECT_EQ(v("f32").float_at(0), 1.5);
  EXPECT_EQ(v("f32").element(1).f, -0.25);
  EXPECT_TRUE(v("bool").bool_at(0));
  EXPECT_FALSE(v("bool").bool_at(1));
  EXPECT_EQ(v("bool").element(2).b, true);
  EXPECT_EQ(v("str").strings(), (std::vector<std::string>{"one", "", "three\n"}));
  EXPECT_EQ(v("str").string_at(2), "three\n");
  EXPECT_EQ(v("str").element(0).str, "one");
  EXPECT_EQ(v("u64").element(0).u, UINT64_MAX);
  EXPECT_EQ(v("u64").int_at(1), 3);
  EXPECT_ERROR_HAS(v("u64").int_at(0), "does not fit in int64");
  EXPECT_EQ(v("i64").int_at(0), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(v("f64").float_at(0), 1e300);
  ASSERT_EQ(v("nest").array_size(), 2u);
  EXPECT_EQ(v("nest").array_at(0).int_at(0), -7);
  EXPECT_EQ(v("nest").array_at(1).elem_type, ValueType::kString);
  EXPECT_TRUE(v("nest").array_at(1).array_empty());
  EXPECT_EQ(v("nest").arrays().size(), 2u);
  EXPECT_EQ(value_type_desc(v("nest")), "array<array<i32>>");

  // Display goes through the same accessors.
  EXPECT_EQ(v("i8").to_string(), "[-128, 127, -1]");
  EXPECT_EQ(v("bool").to_string(), "[true, false, true]");
  EXPECT_EQ(v("str").to_string(), "[\"one\", \"\", \"three\\n\"]");
  EXPECT_EQ(v("f64").to_string(), "[1e+300, -2.5]");
  EXPECT_EQ(v("nest").to_string(), "[[-7], []]");
  EXPECT_EQ(v("u64").to_string(1), "[18446744073709551615, ... (1 more)]");

  // Typed getters over packed storage.
  EXPECT_EQ(f->get_int_array("i16"), (std::vector<int64_t>{-32768, 5}));
  EXPECT_EQ(f->get_int_array("u32"), (std::vector<int64_t>{4294967295LL, 0}));
  EXPECT_EQ(f->get_float_array("f32"), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(f->get_float_array("f64"), (std::vector<float>{std::numeric_limits<float>::infinity(), -2.5f}));
  EXPECT_EQ(f->get_float_array("u8"), (std::vector<float>{0, 255, 7}));
  EXPECT_EQ(f->get_string_array("str"), (std::vector<std::string>{"one", "", "three\n"}));
  EXPECT_ERROR_HAS(f->get_int_array("u64"), "metadata key 'u64' value 18446744073709551615 (u64) does not fit");
  EXPECT_ERROR_HAS(f->get_int_array("bool"), "metadata key 'bool' has type array<bool>, expected an array of integers");
  EXPECT_ERROR_HAS(f->get_float_array("str"), "has type array<string>, expected an array of numbers");
  EXPECT_ERROR_HAS(f->get_string_array("u8"), "metadata key 'u8' has type array<u8>, expected array<string>");
  EXPECT_ERROR_HAS(f->get_int_array("nest"), "array<array<i32>>");
}

TEST(GgufValueArrays, AccessorsCheckTypeAndIndex) {
  const Value u16 = Value::make_packed_array(ValueType::kU16, std::vector<uint8_t>{1, 0, 2, 1});
  EXPECT_EQ(u16.array_size(), 2u);
  EXPECT_EQ(u16.int_at(1), 258);
  EXPECT_ERROR_HAS(u16.int_at(2), "array index 2 is out of range (2 elements)");
  EXPECT_ERROR_HAS(u16.element(5), "out of range");
  EXPECT_ERROR_HAS(u16.bool_at(0), "has type array<u16>, expected array<bool>");
  EXPECT_ERROR_HAS(u16.string_at(0), "expected array<string>");
  EXPECT_ERROR_HAS(u16.array_at(0), "expected an array of arrays");
  EXPECT_ERROR_HAS(u16.strings(), "expected array<string>");
  const Value strs = Value::make_string_array({"a"});
  EXPECT_ERROR_HAS(strs.int_at(0), "has type array<string>, expected an array of integers");
  EXPECT_ERROR_HAS(strs.float_at(0), "expected an array of numbers");
  EXPECT_ERROR_HAS(strs.packed_bytes(), "expected an array of numbers or bools");
  EXPECT_ERROR_HAS(strs.string_at(1), "array index 1 is out of range (1 elements)");
  Value scalar;
  scalar.type = ValueType::kU32;
  scalar.u = 5;
  EXPECT_EQ(scalar.array_size(), 0u);
  EXPECT_ERROR_HAS(scalar.element(0), "has type u32, expected an array");
  EXPECT_ERROR_HAS(scalar.int_at(0), "has type u32, expected an array of integers");
  // A default array Value is empty; every view of it is empty too.
  Value empty;
  empty.type = ValueType::kArray;
  empty.elem_type = ValueType::kF32;
  EXPECT_TRUE(empty.array_empty());
  EXPECT_TRUE(empty.packed_bytes().empty());
  EXPECT_ERROR_HAS(empty.float_at(0), "out of range (0 elements)");
  empty.elem_type = ValueType::kString;
  EXPECT_TRUE(empty.strings().empty());
}

TEST(GgufValueArrays, BuildersAndAppendValidate) {
  EXPECT_ERROR_HAS(Value::make_packed_array(ValueType::kString, std::vector<uint8_t>(8)), "not string");
  EXPECT_ERROR_HAS(Value::make_packed_array(ValueType::kU32, std::vector<uint8_t>(6)), "6 bytes is not a multiple of 4");
  EXPECT_ERROR_HAS(Value::make_packed_array(ValueType::kBool, std::vector<uint8_t>{0, 1, 2}), "bool byte is 2");
  EXPECT_ERROR_HAS(Value::make_packed_array(ValueType::kU8, nullptr, 3), "null data");
  EXPECT_ERROR_HAS(Value::make_packed_array(ValueType::kU64, nullptr, SIZE_MAX / 4), "overflows");
  EXPECT_ERROR_HAS(Value::make_array(static_cast<ValueType>(13)), "unknown array element type id 13");
  Value scalar;
  scalar.type = ValueType::kI32;
  EXPECT_ERROR_HAS(Value::make_array_of_arrays({Value::make_array(ValueType::kU8), scalar}),
                   "element 1 has type i32");

  Value a = Value::make_array(ValueType::kI16);
  Value e;
  e.type = ValueType::kI16;
  e.i = -300;
  a.append(e);
  e.i = 32767;
  a.append(e);
  EXPECT_EQ(a.packed_bytes(), (std::vector<uint8_t>{0xd4, 0xfe, 0xff, 0x7f}));
  e.i = 40000;
  EXPECT_ERROR_HAS(a.append(e), "does not fit in i16");
  e.type = ValueType::kI32;
  EXPECT_ERROR_HAS(a.append(e), "cannot append a i32 to an array of i16");
  EXPECT_ERROR_HAS(scalar.append(e), "not an array");
  EXPECT_EQ(a.array_size(), 2u);

  Value s = Value::make_array(ValueType::kString);
  Value se;
  se.type = ValueType::kString;
  se.str = "x";
  s.append(se);
  Value outer = Value::make_array(ValueType::kArray);
  outer.append(s);
  outer.append(Value::make_array(ValueType::kF64));
  EXPECT_EQ(outer.to_string(), "[[\"x\"], []]");
  // append copies its argument, and copies of a Value are deep: later changes to `s` and to
  // `copy` leave `outer` alone.
  Value copy = outer;
  s.append(se);
  copy.append(s);
  EXPECT_EQ(outer.array_size(), 2u);
  EXPECT_EQ(outer.array_at(0).array_size(), 1u);
  EXPECT_EQ(copy.array_size(), 3u);
  EXPECT_EQ(copy.array_at(2).array_size(), 2u);

  // Storage that disagrees with a hand-changed elem_type is an error, never a misread, and
  // value_type_desc (used inside error messages) still answers.
  Value wrong = Value::make_string_array({"a", "b"});
  wrong.elem_type = ValueType::kArray;
  EXPECT_ERROR_HAS(wrong.array_size(), "holds string elements");
  EXPECT_EQ(value_type_desc(wrong), "array<array>");
  wrong.elem_type = ValueType::kU16;
  EXPECT_ERROR_HAS(wrong.to_string(), "holds string elements");
}

TEST(GgufValueArrays, WriterRoundTripKeepsPackedBytes) {
  // Bytes chosen by the test: every packed type keeps them exactly through write and read.
  GgufWriter w;
  const std::vector<uint8_t> bytes{0x00, 0x80, 0xff, 0x7f, 0x01, 0xfe, 0x10, 0x3f,
                                   0xaa, 0x55, 0xc0, 0x40, 0x00, 0x00, 0x80, 0xbf};
  const ValueType packed[] = {ValueType::kU8,  ValueType::kI8,  ValueType::kU16, ValueType::kI16,
                              ValueType::kU32, ValueType::kI32, ValueType::kF32, ValueType::kU64,
                              ValueType::kI64, ValueType::kF64};
  for (ValueType t : packed)
    w.add_value(std::string("a.") + std::string(value_type_name(t)), Value::make_packed_array(t, bytes));
  w.add_value("a.bool", Value::make_packed_array(ValueType::kBool, std::vector<uint8_t>{1, 1, 0}));
  w.add_value("a.empty", Value::make_array(ValueType::kU64));
  w.add_i32_array("a.i32s", {-1, 2});
  const auto img = w.serialize();
  const auto f = GgufFile::from_bytes(img.data(), img.size());
  for (ValueType t : packed) {
    const Value* v = f->find(std::string("a.") + std::string(value_type_name(t)));
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->elem_type, t);
    EXPECT_EQ(v->array_size(), bytes.size() / value_type_size(t));
    EXPECT_EQ(v->packed_bytes(), bytes);
  }
  EXPECT_EQ(f->find("a.bool")->packed_bytes(), (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_TRUE(f->find("a.empty")->array_empty());
  EXPECT_EQ(f->find("a.empty")->elem_type, ValueType::kU64);
  EXPECT_EQ(f->get_int_array("a.i32s"), (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(f->find("a.i8")->int_at(1), -128);
  EXPECT_EQ(f->find("a.f32")->float_at(3), -1.0);  // 00 00 80 bf
}

}  // namespace
}  // namespace triad::gguf

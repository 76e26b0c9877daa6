// Malformed GGUF images: each must give a clean triad::Error whose message names the field,
// never a crash, a hang or a huge allocation (run this binary under ASan/UBSan too).
//
// Images are built by hand with the small RawImage builder (gguf_test_image.h; the format is
// simple enough to spell out byte by byte) or by patching a valid image written by GgufWriter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_image.h"

namespace triad::gguf {
namespace {

// Parses `img`, expects a triad::Error whose message contains every part.
void expect_error(const std::vector<uint8_t>& img, std::initializer_list<std::string_view> parts) {
  try {
    GgufFile::from_bytes(img.data(), img.size());
    ADD_FAILURE() << "no error; expected one mentioning '" << *parts.begin() << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("GGUF: ", 0), 0u) << msg;
    for (std::string_view p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// A valid image whose tensors are multiples of 32 bytes, so no trailing padding exists and
// every proper prefix is incomplete.
std::vector<uint8_t> small_valid_image() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 1);
  w.add_f32("eps", 1e-5f);
  w.add_bool("flag", true);
  w.add_string_array("tokens", {"a", "bb", ""});
  w.add_f32_array("scores", {1, 2, 3});
  const int32_t zeros[2] = {0, 0};
  const Value inner = Value::make_packed_array(ValueType::kI32, zeros, 2);
  w.add_value("nested", Value::make_array_of_arrays({inner}));
  w.add_tensor("w", DType::kF32, {8, 2}, std::vector<uint8_t>(64, 1));
  w.add_tensor("q", DType::kQ8_0, {32, 16}, std::vector<uint8_t>(34 * 16, 2));  // 544 = 17 * 32
  return w.serialize();
}

TEST(GgufMalformed, EveryTruncationIsAnError) {
  const std::vector<uint8_t> img = small_valid_image();
  ASSERT_NO_THROW(GgufFile::from_bytes(img.data(), img.size()));
  ASSERT_GT(img.size(), 600u);
  for (size_t n = 0; n < img.size(); ++n) {
    try {
      GgufFile::from_bytes(img.data(), n);
      ADD_FAILURE() << "prefix of " << n << " bytes parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("GGUF: ", 0), 0u) << e.what();
    }
  }
  expect_error({}, {"too small"});
  // 137 bytes pass the key-count bound (7 keys x 14 bytes) and end just before the bool value
  // of key #3 'flag' (24 header bytes, 45 + 33 + 19 for keys #0..#2, then 8 + 4 + 4 of key #3).
  expect_error(std::vector<uint8_t>(img.begin(), img.begin() + 137),
               {"metadata key #3 'flag'", "value", "end of file at offset 137"});
  expect_error(std::vector<uint8_t>(img.begin(), img.begin() + 130), {"metadata key #3", "string length 4"});
  expect_error(std::vector<uint8_t>(img.begin(), img.begin() + 30), {"metadata key count 7 exceeds"});
  expect_error(std::vector<uint8_t>(img.begin(), img.end() - 1), {"tensor 'q'", "runs past end of file"});
}

TEST(GgufMalformed, Header) {
  expect_error(RawImage().raw("GGUX", 4).u32(3).u64(0).u64(0).b, {"bad magic", "GGUX"});
  expect_error(RawImage().header(0, 0, 1).b, {"version 1 is not supported"});
  expect_error(RawImage().header(0, 0, 4).b, {"version 4 is not supported"});
  expect_error(RawImage().header(0, 0, 0x03000000).b, {"big-endian"});
  expect_error(RawImage().header(0, 1ULL << 60).zeros(64).b, {"metadata key count", "2^60", "exceeds remaining bytes"});
  expect_error(RawImage().header(1ULL << 62, 0).zeros(64).b, {"tensor count", "2^62", "exceeds remaining bytes"});
  expect_error(RawImage().header(UINT64_MAX, UINT64_MAX).b, {"exceeds remaining bytes"});
  // Enough bytes for the header's bound, but the metadata eats them: checked again before infos.
  RawImage r;
  r.header(2, 1).kv_u32("a", 1);
  expect_error(r.zeros(40).b, {"tensor count 2 exceeds remaining bytes", "after the metadata"});
}

TEST(GgufMalformed, MetadataValues) {
  expect_error(RawImage().header(0, 1).u64(1ULL << 62).zeros(16).b,
               {"metadata key #0", "key", "string length", "2^62", "exceeds remaining bytes"});
  expect_error(RawImage().header(0, 1).str("").u32(4).u32(0).b, {"metadata key #0", "empty key"});
  expect_error(RawImage().header(0, 1).str("k").u32(13).u32(0).b,
               {"metadata key #0 'k'", "value type", "unknown value type id 13"});
  expect_error(RawImage().header(0, 1).str("k").u32(0xFFFFFFFF).u32(0).b, {"unknown value type id 4294967295"});
  expect_error(RawImage().header(0, 1).str("b").u32(7).u8(2).b, {"'b'", "bool byte is 2"});
  expect_error(RawImage().header(0, 1).str("s").u32(8).u64(100).raw("abc", 3).b,
               {"'s'", "string length 100 exceeds remaining bytes (3 left)"});
  expect_error(RawImage().header(0, 2).kv_u32("dup", 1).kv_u32("dup", 2).b,
               {"metadata key #1 'dup'", "duplicate key", "key #0"});
  expect_error(RawImage().header(0, 1).str("k").u32(4).raw("ab", 2).b, {"'k'", "value", "end of file"});
  // Control bytes in a key are escaped in the message.
  expect_error(RawImage().header(0, 1).str("a\nb\x1b").u32(77).b, {"'a\\nb\\x1b'"});
}

TEST(GgufMalformed, Arrays) {
  // tokenizer.ggml.tokens with 2^60 strings in a few bytes.
  expect_error(RawImage().header(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(1ULL << 60).zeros(64).b,
               {"metadata key #0 'tokenizer.ggml.tokens'", "array count", "2^60", "exceeds remaining bytes"});
  // u64 elements: the bound uses the element size (3 elements need 24 bytes, 20 left).
  expect_error(RawImage().header(0, 1).str("k").u32(9).u32(10).u64(3).zeros(20).b, {"array count 3 exceeds"});
  expect_error(RawImage().header(0, 1).str("k").u32(9).u32(14).u64(0).b, {"array element type", "unknown value type id 14"});
  expect_error(RawImage().header(0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(3).b, {"'k'", "array element", "bool byte is 3"});
  expect_error(RawImage().header(0, 1).str("k").u32(9).u32(8).u64(2).str("ok").u64(50).b, {"'k'", "array element", "string length 50"});
  // Arrays of arrays: exactly kMaxArrayDepth levels parse; one more is rejected.
  auto nested = [](int depth) {
    RawImage r;
    r.header(0, 1).str("deep").u32(9);
    for (int d = 1; d < depth; ++d) r.u32(9).u64(1);
    r.u32(0).u64(1).u8(42);
    return r.b;
  };
  const auto ok = nested(kMaxArrayDepth);
  auto f = GgufFile::from_bytes(ok.data(), ok.size());
  const Value* v = f->find("deep");
  for (int d = 1; d < kMaxArrayDepth; ++d) v = &v->array_at(0);
  EXPECT_EQ(v->elem_type, ValueType::kU8);
  EXPECT_EQ(v->element(0).u, 42u);
  expect_error(nested(kMaxArrayDepth + 1), {"'deep'", "nested deeper than 8"});
  expect_error(nested(1000), {"nested deeper than 8"});
  // An empty array is fine.
  const auto empty = RawImage().header(0, 1).str("e").u32(9).u32(6).u64(0).b;
  EXPECT_TRUE(GgufFile::from_bytes(empty.data(), empty.size())->find("e")->array_empty());
}

TEST(GgufMalformed, Alignment) {
  for (uint32_t a : {0u, 3u, 48u, 0x80000001u}) {
    expect_error(RawImage().header(0, 1).kv_u32("general.alignment", a).b,
                 {"general.alignment", "is not a nonzero power of two"});
  }
  expect_error(RawImage().header(0, 1).str("general.alignment").u32(8).str("32").b,
               {"general.alignment", "has type string"});
  expect_error(RawImage().header(0, 1).str("general.alignment").u32(5).u32(static_cast<uint32_t>(-32)).b,
               {"general.alignment", "not a nonzero power of two"});
  // A valid custom alignment moves the data section.
  RawImage r;
  r.header(1, 1).kv_u32("general.alignment", 256).tensor("t", {4}, 0, 0).pad(256).zeros(16);
  auto f = GgufFile::from_bytes(r.b.data(), r.b.size());
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset(), 256u);
}

TEST(GgufMalformed, TensorInfos) {
  auto one = [](std::initializer_list<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
    RawImage r;
    r.header(1, 0).tensor("blk.0.attn_q.weight", dims, type, offset).pad().zeros(data);
    return r.b;
  };
  {
    const auto ok = one({8, 4}, 0, 0, 128);
    const auto f = GgufFile::from_bytes(ok.data(), ok.size());
    const TensorInfo& t = f->tensors().at(0);
    EXPECT_EQ(t.n_bytes, 128u);
  }
  expect_error(one({8, 4}, 0, 0, 127), {"tensor 'blk.0.attn_q.weight'", "data [offset 0, 128 bytes]",
                                        "runs past end of file"});
  expect_error(one({8, 4}, 0, 1ULL << 40, 128), {"'blk.0.attn_q.weight'", "runs past end of file"});
  expect_error(one({8, 4}, 0, UINT64_MAX - 31, 128), {"'blk.0.attn_q.weight'", "runs past end of file"});
  expect_error(one({8, 4}, 0, 4, 160), {"'blk.0.attn_q.weight'", "offset 4 is not a multiple of the alignment 32"});
  expect_error(one({1ULL << 40, 1ULL << 40}, 0, 0, 64), {"'blk.0.attn_q.weight'", "ne[1]", "element count overflows"});
  expect_error(one({1ULL << 63}, 0, 0, 64), {"ne[0]", "does not fit in int64"});
  expect_error(one({1ULL << 62, 1, 1, 2}, 0, 0, 64), {"ne[3]", "element count overflows"});
  // Element count fits but the byte size is far beyond the file.
  expect_error(one({1ULL << 61}, 0, 0, 64), {"runs past end of file"});
  expect_error(one({8, 0}, 0, 0, 64), {"ne[1]", "dimension is 0"});
  expect_error(one({8, 4, 1, 1, 1}, 0, 0, 64), {"n_dims", "5 dimensions"});
  expect_error(one({8, 4}, 4, 0, 64), {"'blk.0.attn_q.weight'", "type", "unknown tensor type id 4"});
  expect_error(one({8, 4}, 0xFFFFFFFF, 0, 64), {"unknown tensor type id 4294967295"});
  expect_error(one({33, 1}, 8, 0, 64), {"ne[0]", "33 is not a multiple of the Q8_0 block size 32"});
  expect_error(one({255}, 12, 0, 256), {"255 is not a multiple of the Q4_K block size 256"});
  // Zero dimensions: a scalar of one element.
  {
    const auto scalar = one({}, 0, 0, 32);
    const auto f = GgufFile::from_bytes(scalar.data(), scalar.size());
    const TensorInfo& t = f->tensors().at(0);
    EXPECT_EQ(t.n_dims, 0);
    EXPECT_EQ(t.n_elements, 1u);
    EXPECT_EQ(t.n_bytes, 4u);
  }
  // Names.
  {
    RawImage r;
    r.header(1, 0).u64(1ULL << 50).zeros(64);
    expect_error(r.b, {"tensor #0", "name", "string length", "2^50"});
  }
  {
    RawImage r;
    r.header(1, 0).tensor("", {4}, 0, 0).pad().zeros(16);
    expect_error(r.b, {"tensor #0", "empty tensor name"});
  }
  {
    RawImage r;
    r.header(2, 0).tensor("x", {8}, 0, 0).tensor("x", {8}, 0, 32).pad().zeros(64);
    expect_error(r.b, {"tensor 'x'", "duplicate tensor name", "tensor #0"});
  }
  {
    RawImage r;
    r.header(2, 0).tensor("x", {16}, 0, 0).tensor("y", {8}, 0, 32).pad().zeros(96);
    expect_error(r.b, {"'x'", "'y'", "overlap"});
  }
  {
    // The data section itself would start past the end of the file.
    RawImage r;
    r.header(1, 0).tensor("x", {8}, 0, 0);
    expect_error(r.b, {"data section", "past end of file"});
  }
}

TEST(GgufMalformed, PatchedWriterImage) {
  std::vector<uint8_t> img = small_valid_image();
  // Locate the info of tensor "w" (u64 length 1, 'w', then n_dims) and corrupt its fields.
  const uint8_t needle[] = {1, 0, 0, 0, 0, 0, 0, 0, 'w', 2, 0, 0, 0};
  auto it = std::search(img.begin(), img.end(), std::begin(needle), std::end(needle));
  ASSERT_NE(it, img.end());
  const size_t ndims_at = static_cast<size_t>(it - img.begin()) + 9;
  auto patched = [&](size_t at, uint64_t v, size_t n) {
    std::vector<uint8_t> c = img;
    std::memcpy(c.data() + at, &v, n);
    return c;
  };
  expect_error(patched(ndims_at, 9, 4), {"tensor 'w'", "n_dims", "9 dimensions"});
  expect_error(patched(ndims_at + 4, 1ULL << 40, 8), {"tensor 'w'", "runs past end of file"});
  expect_error(patched(ndims_at + 20, 99, 4), {"tensor 'w'", "unknown tensor type id 99"});
  expect_error(patched(ndims_at + 24, 8, 8), {"tensor 'w'", "not a multiple of the alignment"});
  expect_error(patched(ndims_at + 24, 1ULL << 30, 8), {"tensor 'w'", "runs past end of file"});
  expect_error(patched(4, 1, 4), {"version 1"});
}

}  // namespace
}  // namespace triad::gguf

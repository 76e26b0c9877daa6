// Tests of the GGUF reader on real and independently written files, the typed getters, the
// writer round trip and the inspect report.
//
// Expected values for stories260K.gguf, llama-2-tiny-random.gguf and the python-made corpus
// seeds were read with gguf-py's GGUFReader (an independent implementation), not with Triad.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/inspect.h"

namespace triad::gguf {
namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Path of a file under $TRIAD_TESTDATA, or "" when it is not there.
std::string testdata(const std::string& rel) {
  const std::string root = env_or_empty("TRIAD_TESTDATA");
  if (root.empty()) return {};
  const fs::path p = fs::path(root) / rel;
  return fs::exists(p) ? p.string() : std::string();
}

std::string corpus(const std::string& name) {
  const std::string root = env_or_empty("TRIAD_SOURCE_DIR");
  if (root.empty()) return {};
  const fs::path p = fs::path(root) / "tests/fuzz/corpus/gguf" / name;
  return fs::exists(p) ? p.string() : std::string();
}

float f32_at(const TensorInfo& t, size_t k) {
  float v;
  std::memcpy(&v, t.data + 4 * k, 4);
  return v;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GgufStories260K, HeaderMetadataAndTensors) {
  const std::string path = testdata("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "missing $TRIAD_TESTDATA/models/stories260K.gguf";
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->data_offset(), 14176u);
  EXPECT_EQ(f->path(), path);
  ASSERT_EQ(f->metadata().size(), 19u);
  ASSERT_EQ(f->tensors().size(), 48u);
  EXPECT_EQ(f->metadata()[0].first, "tokenizer.ggml.tokens");
  EXPECT_EQ(f->metadata()[18].first, "llama.attention.layer_norm_rms_epsilon");

  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.context_length"), 2048);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.rope.dimension_count"), 8);
  EXPECT_EQ(f->get_int("tokenizer.ggml.seperator_token_id"), 4294967295LL);
  EXPECT_EQ(f->find("llama.block_count")->type, ValueType::kU32);
  EXPECT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f->get_float("llama.embedding_length"), 64.0);  // integers are accepted as floats

  const auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 512u);
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  EXPECT_EQ(tokens[3], "<0x00>");
  EXPECT_EQ(tokens[259], "\xe2\x96\x81t");  // "▁t"
  EXPECT_EQ(tokens[260], "he");
  EXPECT_EQ(tokens[300], "\xe2\x96\x81ha");
  EXPECT_EQ(tokens[511], "\xe2\x80\x8a");  // U+200A
  const auto scores = f->get_float_array("tokenizer.ggml.scores");
  ASSERT_EQ(scores.size(), 512u);
  EXPECT_EQ(scores[260], -1.0f);
  EXPECT_EQ(scores[263], -4.0f);
  EXPECT_EQ(scores[511], -252.0f);
  const auto types = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(types.size(), 512u);
  EXPECT_EQ(types[0], 2);
  EXPECT_EQ(types[1], 3);
  EXPECT_EQ(types[3], 6);
  EXPECT_EQ(types[259], 1);
  EXPECT_EQ(std::accumulate(types.begin(), types.end(), int64_t{0}), 1797);

  const TensorInfo* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::kF32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->ne[2], 1);
  EXPECT_EQ(emb->ne[3], 1);
  EXPECT_EQ(emb->offset, 0u);
  EXPECT_EQ(emb->n_elements, 32768u);
  EXPECT_EQ(emb->n_bytes, 131072u);
  EXPECT_FLOAT_EQ(f32_at(*emb, 0), -0.29474878f);
  EXPECT_FLOAT_EQ(f32_at(*emb, 1), 0.5618956f);
  EXPECT_EQ(f->tensors()[1].name, "output_norm.weight");
  EXPECT_FLOAT_EQ(f32_at(f->tensors()[1], 0), 2.458309f);
  const TensorInfo* down = f->find_tensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->ne[0], 172);
  EXPECT_EQ(down->ne[1], 64);
  EXPECT_EQ(down->offset, 355840u);
  EXPECT_EQ(down->n_bytes, 44032u);
  const TensorInfo* last = f->find_tensor("blk.4.ffn_norm.weight");
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->n_dims, 1);
  EXPECT_EQ(last->offset, 1170944u);
  EXPECT_EQ(last->n_bytes, 256u);
  EXPECT_EQ(last->data, emb->data + 1170944);
  EXPECT_FLOAT_EQ(f32_at(*last, 0), 1.0344242f);
  EXPECT_EQ(f->find_tensor("blk.5.ffn_norm.weight"), nullptr);
}

TEST(GgufStories260K, GetterErrorsNameKeyAndType) {
  const std::string path = testdata("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "missing $TRIAD_TESTDATA/models/stories260K.gguf";
  auto f = GgufFile::open(path);
  std::string e = error_of([&] { f->get_string("llama.embedding_length"); });
  EXPECT_NE(e.find("llama.embedding_length"), std::string::npos) << e;
  EXPECT_NE(e.find("u32"), std::string::npos) << e;
  EXPECT_NE(e.find("string"), std::string::npos) << e;
  e = error_of([&] { f->get_int("general.name"); });
  EXPECT_NE(e.find("general.name"), std::string::npos) << e;
  EXPECT_NE(e.find("integer"), std::string::npos) << e;
  e = error_of([&] { f->get_int("no.such.key"); });
  EXPECT_NE(e.find("no.such.key"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  e = error_of([&] { f->get_string_array("tokenizer.ggml.scores"); });
  EXPECT_NE(e.find("array<f32>"), std::string::npos) << e;
  e = error_of([&] { f->get_int_array("tokenizer.ggml.scores"); });
  EXPECT_NE(e.find("tokenizer.ggml.scores"), std::string::npos) << e;
  e = error_of([&] { f->get_bool("llama.block_count"); });
  EXPECT_NE(e.find("bool"), std::string::npos) << e;
  e = error_of([&] { f->get_float("general.architecture"); });
  EXPECT_NE(e.find("general.architecture"), std::string::npos) << e;

  EXPECT_EQ(f->get_int("no.such.key", 7), 7);
  EXPECT_EQ(f->get_float("no.such.key", 0.5), 0.5);
  EXPECT_EQ(f->get_string("no.such.key", "x"), "x");
  EXPECT_TRUE(f->get_bool("no.such.key", true));
  EXPECT_EQ(f->get_int("llama.block_count", 7), 5);
  EXPECT_THROW(f->get_int("general.name", 7), Error);  // present with the wrong type
  EXPECT_TRUE(f->get_string_array("no.such.key").empty());
  EXPECT_TRUE(f->get_float_array("no.such.key").empty());
  EXPECT_TRUE(f->get_int_array("no.such.key").empty());
  // Numeric arrays of integers are readable as floats.
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.token_type")[0], 2.0f);
}

TEST(GgufStories260K, InspectReport) {
  const std::string path = testdata("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "missing $TRIAD_TESTDATA/models/stories260K.gguf";
  auto f = GgufFile::open(path);
  const std::string brief = describe_gguf(*f, false);
  for (const char* part : {"version      3", "alignment    32", "data offset  14176", "19 keys",
                           "llama.embedding_length", "array<string>[512]", "\"<unk>\", \"<s>\"",
                           "... (504 more)", "token_embd.weight", "64 x 512", "131072",
                           "blk.0.ffn_down.weight", "172 x 64", "355840", "1e-05", "F32",
                           "48 tensors", "292800 elements", "1171200 bytes"})
    EXPECT_NE(brief.find(part), std::string::npos) << "missing '" << part << "' in:\n" << brief;
  const std::string full = describe_gguf(*f, true);
  EXPECT_EQ(full.find("more)"), std::string::npos);
  EXPECT_NE(full.find("\"\xe2\x80\x8a\"]"), std::string::npos);  // the last token is shown
  EXPECT_GT(full.size(), brief.size() + 4000);
}

TEST(GgufTinyRandom, F16Model) {
  const std::string path = testdata("models/llama-2-tiny-random.gguf");
  if (path.empty()) GTEST_SKIP() << "missing $TRIAD_TESTDATA/models/llama-2-tiny-random.gguf";
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 18u);
  EXPECT_EQ(f->data_offset(), 724416u);
  ASSERT_EQ(f->tensors().size(), 12u);
  EXPECT_EQ(f->get_string("general.name"), "LLaMA v2");
  EXPECT_EQ(f->get_int("llama.embedding_length"), 8);
  EXPECT_EQ(f->get_int("general.file_type"), 1);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 32000u);
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").size(), 32000u);
  const TensorInfo& emb = f->tensors()[0];
  EXPECT_EQ(emb.name, "token_embd.weight");
  EXPECT_EQ(emb.type, DType::kF16);
  EXPECT_EQ(emb.ne[0], 8);
  EXPECT_EQ(emb.ne[1], 32000);
  EXPECT_EQ(emb.n_bytes, 512000u);
  const TensorInfo* out = f->find_tensor("output.weight");
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(out->type, DType::kF16);
  EXPECT_EQ(out->offset, 514144u);
  EXPECT_EQ(f->find_tensor("output_norm.weight")->type, DType::kF32);
}

// Seeds written by gguf-py (tests/fuzz/make_corpus.py): every value type, nested arrays,
// alignment 64 and quantized tensors, as written by an implementation other than ours.
TEST(GgufCorpus, PythonWrittenAllTypes) {
  for (const char* name : {"valid_all_types.gguf", "valid_v2.gguf"}) {
    const std::string path = corpus(name);
    if (path.empty()) GTEST_SKIP() << "missing tests/fuzz/corpus/gguf/" << name << " (TRIAD_SOURCE_DIR)";
    auto f = GgufFile::open(path);
    EXPECT_EQ(f->version(), std::string(name) == "valid_v2.gguf" ? 2u : 3u);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset(), 896u);
    EXPECT_EQ(f->metadata().size(), 19u);
    EXPECT_EQ(f->get_int("t.u8"), 200);
    EXPECT_EQ(f->get_int("t.i8"), -100);
    EXPECT_EQ(f->get_int("t.u16"), 60000);
    EXPECT_EQ(f->get_int("t.i16"), -30000);
    EXPECT_EQ(f->get_int("t.u32"), 4000000000LL);
    EXPECT_EQ(f->get_int("t.i32"), -2000000000);
    EXPECT_EQ(f->get_float("t.f32"), 0.25);
    EXPECT_TRUE(f->get_bool("t.bool"));
    EXPECT_EQ(f->get_string("t.str"), "h\xc3\xa9llo\nworld");
    EXPECT_EQ(f->find("t.u64")->u, 18000000000000000000ULL);
    EXPECT_THROW(f->get_int("t.u64"), Error);  // does not fit in int64
    EXPECT_EQ(f->get_int("t.i64"), -9000000000000000000LL);
    EXPECT_EQ(f->get_float("t.f64"), -1.5e300);
    EXPECT_EQ(f->get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "ccc"}));
    EXPECT_EQ(f->get_float_array("t.arr_f32"), (std::vector<float>{1.5f, -2.0f, 3.25f}));
    EXPECT_EQ(f->get_int_array("t.arr_i32"), (std::vector<int64_t>{7, -8, 9, 10}));
    const Value* bools = f->find("t.arr_bool");
    ASSERT_NE(bools, nullptr);
    EXPECT_EQ(bools->elem_type, ValueType::kBool);
    ASSERT_EQ(bools->array_size(), 2u);
    EXPECT_TRUE(bools->bool_at(0));
    EXPECT_FALSE(bools->bool_at(1));
    EXPECT_EQ(bools->packed_bytes(), (std::vector<uint8_t>{1, 0}));
    const Value* nested = f->find("t.nested");
    ASSERT_NE(nested, nullptr);
    EXPECT_EQ(nested->elem_type, ValueType::kArray);
    ASSERT_EQ(nested->array_size(), 3u);
    EXPECT_EQ(nested->array_at(2).elem_type, ValueType::kI32);
    ASSERT_EQ(nested->array_at(2).array_size(), 3u);
    EXPECT_EQ(nested->array_at(2).int_at(2), 6);
    EXPECT_EQ(nested->array_at(0).element(1).i, 2);
    EXPECT_EQ(nested->element(1).to_string(), "[3]");
    EXPECT_EQ(nested->to_string(), "[[1, 2], [3], [4, 5, 6]]");
    EXPECT_EQ(value_type_desc(*nested), "array<array<i32>>");

    ASSERT_EQ(f->tensors().size(), 5u);
    const TensorInfo& t0 = f->tensors()[0];
    EXPECT_EQ(t0.name, "f32.2d");
    EXPECT_EQ(t0.ne[0], 4);
    EXPECT_EQ(t0.ne[1], 2);
    EXPECT_FLOAT_EQ(f32_at(t0, 0), -1.6038367748260498f);
    const TensorInfo* q8 = f->find_tensor("q8_0.2d");
    ASSERT_NE(q8, nullptr);
    EXPECT_EQ(q8->type, DType::kQ8_0);
    EXPECT_EQ(q8->ne[0], 32);
    EXPECT_EQ(q8->ne[1], 2);
    EXPECT_EQ(q8->offset, 128u);
    EXPECT_EQ(q8->n_bytes, 68u);
    EXPECT_EQ(q8->data[0], 220);
    EXPECT_EQ(q8->data[3], 203);
    const TensorInfo* q4k = f->find_tensor("q4_k.1d");
    ASSERT_NE(q4k, nullptr);
    EXPECT_EQ(q4k->type, DType::kQ4_K);
    EXPECT_EQ(q4k->n_elements, 256u);
    EXPECT_EQ(q4k->n_bytes, 144u);
    EXPECT_EQ(q4k->offset, 256u);
    EXPECT_EQ(q4k->data[0], 212);
    const TensorInfo* i32 = f->find_tensor("i32.1d");
    ASSERT_NE(i32, nullptr);
    EXPECT_EQ(i32->type, DType::kI32);
    EXPECT_EQ(i32->offset, 448u);
    EXPECT_EQ(i32->n_bytes, 12u);
  }
}

TEST(GgufCorpus, PythonWrittenMinimalHasNoTensors) {
  const std::string path = corpus("valid_minimal.gguf");
  if (path.empty()) GTEST_SKIP() << "missing tests/fuzz/corpus/gguf/valid_minimal.gguf (TRIAD_SOURCE_DIR)";
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->get_string("general.name"), "minimal");
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->data_offset(), 128u);
}

// ---- writer round trip ----

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

GgufWriter sample_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u8("k.u8", 255);
  w.add_u32("k.u32", 4294967295u);
  w.add_i32("k.i32", -7);
  w.add_u64("k.u64", 1ULL << 40);
  w.add_i64("k.i64", -(1LL << 50));
  w.add_f32("k.f32", 1e-5f);
  w.add_f64("k.f64", 0.1);
  w.add_bool("k.bool", false);
  w.add_string_array("k.strs", {"x", "", "a\"b"});
  w.add_f32_array("k.f32s", {0.5f, -1.0f});
  w.add_i32_array("k.i32s", {});
  const Value inner = Value::make_string_array({"deep"});
  w.add_value("k.nested", Value::make_array_of_arrays({inner, inner}));
  w.add_tensor("a", DType::kF32, {3, 2}, f32_bytes({1, 2, 3, 4, 5, 6}));
  std::vector<uint8_t> q8(34 * 2, 0x11);
  w.add_tensor("b", DType::kQ8_0, {32, 1, 2}, q8);
  std::vector<uint8_t> f16(2 * 4 * 1 * 2, 0x3c);
  w.add_tensor("c", DType::kF16, {4, 1, 1, 2}, f16);
  return w;
}

void check_sample(const GgufFile& f, uint64_t alignment) {
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("k.u8"), 255);
  EXPECT_EQ(f.get_int("k.u32"), 4294967295LL);
  EXPECT_EQ(f.get_int("k.i32"), -7);
  EXPECT_EQ(f.get_int("k.u64"), 1LL << 40);
  EXPECT_EQ(f.get_int("k.i64"), -(1LL << 50));
  EXPECT_EQ(static_cast<float>(f.get_float("k.f32")), 1e-5f);
  EXPECT_EQ(f.get_float("k.f64"), 0.1);
  EXPECT_FALSE(f.get_bool("k.bool"));
  EXPECT_EQ(f.get_string_array("k.strs"), (std::vector<std::string>{"x", "", "a\"b"}));
  EXPECT_EQ(f.get_float_array("k.f32s"), (std::vector<float>{0.5f, -1.0f}));
  EXPECT_TRUE(f.get_int_array("k.i32s").empty());
  EXPECT_EQ(f.find("k.i32s")->elem_type, ValueType::kI32);
  EXPECT_EQ(f.find("k.nested")->to_string(), "[[\"deep\"], [\"deep\"]]");
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorInfo& a = f.tensors()[0];
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.n_bytes, 24u);
  EXPECT_EQ(f32_at(a, 5), 6.0f);
  const TensorInfo& b = f.tensors()[1];
  EXPECT_EQ(b.n_dims, 3);
  EXPECT_EQ(b.ne[2], 2);
  EXPECT_EQ(b.n_elements, 64u);
  EXPECT_EQ(b.n_bytes, 68u);
  EXPECT_EQ(b.offset, alignment);  // 24 bytes padded to one alignment unit
  EXPECT_EQ(b.data[67], 0x11);
  const TensorInfo& c = f.tensors()[2];
  EXPECT_EQ(c.n_dims, 4);
  EXPECT_EQ(c.ne[3], 2);
  EXPECT_EQ(c.offset % alignment, 0u);
  EXPECT_EQ(c.n_bytes, 16u);
}

TEST(GgufWriter, RoundTripInMemoryAndThroughAFile) {
  GgufWriter w = sample_writer();
  const std::vector<uint8_t> img = w.serialize();
  check_sample(*GgufFile::from_bytes(img.data(), img.size()), 32);
  EXPECT_EQ(img.size() % 32, 0u);  // the last tensor is padded too

  const fs::path dir = fs::temp_directory_path() / ("triad_gguf_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "sample.gguf").string();
  w.write_file(path);
  EXPECT_EQ(fs::file_size(path), img.size());
  auto f = GgufFile::open(path);
  check_sample(*f, 32);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(disk, img);
  fs::remove_all(dir);
}

TEST(GgufWriter, CustomAlignment) {
  GgufWriter w = sample_writer();
  w.set_alignment(128);
  const std::vector<uint8_t> img = w.serialize();
  auto f = GgufFile::from_bytes(img.data(), img.size());
  check_sample(*f, 128);
  EXPECT_EQ(f->get_int("general.alignment"), 128);
  // Copying all metadata and tensors from a parsed file reproduces it byte for byte.
  GgufWriter copy;
  for (const auto& [key, v] : f->metadata()) copy.add_value(key, v);
  for (const TensorInfo& t : f->tensors()) {
    std::vector<int64_t> dims(t.ne, t.ne + t.n_dims);
    copy.add_tensor_ref(t.name, t.type, dims, t.data, t.n_bytes);
  }
  EXPECT_EQ(copy.alignment(), 128u);
  EXPECT_EQ(copy.serialize(), img);
}

TEST(GgufWriter, RejectsInvalidInput) {
  GgufWriter w;
  w.add_u32("a", 1);
  EXPECT_THROW(w.add_u32("a", 2), Error);
  EXPECT_THROW(w.add_string("", "x"), Error);
  EXPECT_THROW(w.set_alignment(0), Error);
  EXPECT_THROW(w.set_alignment(48), Error);
  EXPECT_THROW(w.add_u32("general.alignment", 3), Error);
  // Storage that no longer matches elem_type (changed by hand) is refused, not misencoded.
  Value bad = Value::make_string_array({"x"});
  bad.elem_type = ValueType::kU32;
  const std::string e = error_of([&] { w.add_value("mixed", bad); });
  EXPECT_NE(e.find("GgufWriter: key 'mixed'"), std::string::npos) << e;
  EXPECT_NE(e.find("holds string elements"), std::string::npos) << e;
  const Value nested_ok =
      Value::make_array_of_arrays({Value::make_packed_array(ValueType::kU16, std::vector<uint8_t>(4))});
  EXPECT_NO_THROW(w.add_value("nested_ok", nested_ok));
  Value deep = Value::make_array(ValueType::kU8);
  for (int d = 1; d < kMaxArrayDepth; ++d) deep = Value::make_array_of_arrays({deep});
  w.add_value("deep8", deep);  // exactly the limit
  EXPECT_THROW(w.add_value("deep9", Value::make_array_of_arrays({deep})), Error);
  const std::vector<uint8_t> four(4);
  w.add_tensor("t", DType::kF32, {1}, four);
  EXPECT_THROW(w.add_tensor("t", DType::kF32, {1}, four), Error);           // duplicate
  EXPECT_THROW(w.add_tensor("u", DType::kF32, {2}, four), Error);           // size mismatch
  EXPECT_THROW(w.add_tensor("u", DType::kF32, {}, four), Error);            // no dims
  EXPECT_THROW(w.add_tensor("u", DType::kF32, {1, 1, 1, 1, 1}, four), Error);
  EXPECT_THROW(w.add_tensor("u", DType::kF32, {0}, {}), Error);
  EXPECT_THROW(w.add_tensor("u", DType::kQ8_0, {16}, std::vector<uint8_t>(17)), Error);
  EXPECT_THROW(w.add_tensor("u", DType::kF32, {1LL << 40, 1LL << 40}, four), Error);
  const std::vector<uint8_t> img = w.serialize();
  auto f = GgufFile::from_bytes(img.data(), img.size());
  EXPECT_EQ(f->metadata().size(), 3u);
  EXPECT_EQ(f->find("nested_ok")->array_at(0).int_at(1), 0);
  EXPECT_EQ(f->tensors().size(), 1u);
}

TEST(GgufOpen, FileErrorsNameThePath) {
  const fs::path dir = fs::temp_directory_path() / ("triad_gguf_open_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string e = error_of([&] { GgufFile::open((dir / "absent.gguf").string()); });
  EXPECT_NE(e.find("absent.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
  e = error_of([&] { GgufFile::open(dir.string()); });
  EXPECT_NE(e.find("not a regular file"), std::string::npos) << e;
  const std::string empty = (dir / "empty.gguf").string();
  std::ofstream(empty).close();
  e = error_of([&] { GgufFile::open(empty); });
  EXPECT_NE(e.find("empty.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("is empty"), std::string::npos) << e;
  const std::string bad = (dir / "bad.gguf").string();
  std::ofstream(bad, std::ios::binary).write("GGUF\x01\x00\x00\x00", 8);
  e = error_of([&] { GgufFile::open(bad); });
  EXPECT_NE(e.find("bad.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find("version 1 is not supported"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(GgufValue, ToStringEscapesAndElides) {
  Value s;
  s.type = ValueType::kString;
  s.str = std::string("a\"\\\n\x01\x7f\xc3\xa9", 8);
  EXPECT_EQ(s.to_string(), "\"a\\\"\\\\\\n\\x01\\x7f\xc3\xa9\"");
  s.str = std::string(300, 'x');
  EXPECT_EQ(s.to_string(), "\"" + std::string(256, 'x') + "\"...(300 bytes)");
  // A cut never splits a UTF-8 sequence.
  EXPECT_EQ(quote_bytes("ab\xc3\xa9", 3), "\"ab\"...(4 bytes)");
  Value a;
  a.type = ValueType::kArray;
  a.elem_type = ValueType::kU16;
  for (int k = 0; k < 10; ++k) {
    Value e;
    e.type = ValueType::kU16;
    e.u = static_cast<uint64_t>(k);
    a.append(e);
  }
  EXPECT_EQ(a.to_string(3), "[0, 1, 2, ... (7 more)]");
  EXPECT_EQ(a.to_string(), "[0, 1, 2, 3, 4, 5, 6, 7, ... (2 more)]");
  EXPECT_EQ(a.to_string(100), "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]");
  EXPECT_EQ(a.to_string(0), "[... (10 more)]");
  Value f;
  f.type = ValueType::kF32;
  f.f = static_cast<double>(1e-5f);
  EXPECT_EQ(f.to_string(), "1e-05");
  f.type = ValueType::kF64;
  f.f = 0.1;
  EXPECT_EQ(f.to_string(), "0.1");
  Value i;
  i.type = ValueType::kI64;
  i.i = -5;
  EXPECT_EQ(i.to_string(), "-5");
  EXPECT_EQ(i.as_int(), -5);
  EXPECT_EQ(i.as_float(), -5.0);
  EXPECT_THROW(s.as_int(), Error);
  EXPECT_THROW(s.as_float(), Error);
  EXPECT_EQ(value_type_name(ValueType::kBool), "bool");
  EXPECT_EQ(value_type_name(static_cast<ValueType>(99)), "unknown");
}

}  // namespace
}  // namespace triad::gguf

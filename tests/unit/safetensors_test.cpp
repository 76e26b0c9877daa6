// The safetensors reader (src/safetensors): files written by PyPI `safetensors` (the format's
// reference implementation; tests/fuzz/make_safetensors_corpus.py wrote them) read back with the
// values they were given; the malformed corpus files (each refused by the reference library as
// well) and hand-made ones are refused with errors naming the problem; sharded checkpoints; FP8
// weights with DeepSeek-style block scales.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "safetensors/safetensors.h"

using namespace triad::safetensors;
namespace fs = std::filesystem;

namespace {

const fs::path kCorpus = fs::path(TRIAD_SOURCE_DIR) / "tests/fuzz/corpus/safetensors";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<SafetensorsFile> from_string(const std::string& s) {
  return SafetensorsFile::from_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// A file from a header's JSON text and a data section.
std::string image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i) & 0xff);
  return out + header + data;
}

std::vector<float> values(const Tensor& t, const Tensor* scale = nullptr) {
  std::vector<float> v(t.n_elements);
  to_f32(t, v.data(), scale);
  return v;
}

void expect_error(const std::string& bytes, const std::string& needle) {
  try {
    from_string(bytes);
    ADD_FAILURE() << "accepted; expected an error mentioning '" << needle << "'";
  } catch (const triad::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(Safetensors, ReadsWhatTheReferenceLibraryWrote) {
  auto f = SafetensorsFile::open((kCorpus / "valid_f32_f16").string());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const Tensor* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values(*a), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  const Tensor* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(values(*b), (std::vector<float>{0, 0.5f, 1, 1.5f}));
  const Tensor* e = f->find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->n_elements, 0u);
  EXPECT_EQ(f->find("nope"), nullptr);

  auto ints = SafetensorsFile::open((kCorpus / "valid_ints").string());
  const Tensor* i8 = ints->find("i8");
  ASSERT_NE(i8, nullptr);
  EXPECT_EQ(i8->dtype, DType::kI8);
  EXPECT_EQ(static_cast<int8_t>(i8->data[2]), -3);
  EXPECT_EQ(values(*ints->find("f64")), (std::vector<float>{0.25f}));
  EXPECT_THROW(values(*i8), triad::Error);  // not a float type

  auto bf = SafetensorsFile::open((kCorpus / "valid_bf16").string());
  EXPECT_EQ(values(*bf->find("w")), (std::vector<float>{1.f, -2.f, 0.5f}));
}

TEST(Safetensors, Fp8WeightsWithBlockScales) {
  auto f = SafetensorsFile::open((kCorpus / "valid_fp8_block_scaled").string());
  const Tensor* w = f->find("w.weight");
  const Tensor* s = f->find("w.weight_scale_inv");
  ASSERT_TRUE(w && s);
  EXPECT_EQ(values(*w), (std::vector<float>{1, 2, -1, 0, 0.5f, 3}));
  EXPECT_EQ(values(*w, s), (std::vector<float>{0.5f, 1, -0.5f, 0, 0.25f, 1.5f}));
  // Smaller blocks need more scales: [2, 3] in 1x2 blocks needs [2, 2].
  std::vector<float> out(6);
  EXPECT_THROW(to_f32(*w, out.data(), s, 1, 2), triad::Error);
  EXPECT_THROW(to_f32(*s, out.data(), s), triad::Error);  // scales go with FP8 weights only
}

TEST(Safetensors, MalformedFilesAreRefusedWithClearErrors) {
  const std::pair<const char*, const char*> corpus[] = {
      {"bad_truncated", "outside the data section (13 bytes)"},  // the header is fine; the data is short
      {"bad_header_len_past_end", "over the 100000000-byte bound"},
      {"bad_header_len_huge", "bound"},
      {"bad_not_json", "not valid JSON"},
      {"bad_dtype", "unsupported dtype 'Q4_K'"},
      {"bad_negative_shape", "non-negative"},
      {"bad_size_mismatch", "the shape needs 20"},
      {"bad_overlap", "overlaps"},
      {"bad_hole", "a hole of 8 bytes"},
      {"bad_shape_overflow", "overflows"},
      {"bad_deep", "nests deeper"},
      {"bad_metadata_not_string", "is not a string"},
  };
  for (const auto& [file, needle] : corpus) {
    SCOPED_TRACE(file);
    expect_error(slurp(kCorpus / file), needle);
  }
  expect_error("", "shorter than the 8-byte header length");
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", "").substr(0, 20), "runs past the end");
  expect_error(image("[1]", ""), "does not start with '{'");
  expect_error(image("{\"a\": 3}", ""), "not an object");
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [1]}})", std::string(4, '\0')), "data_offsets");
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}})", std::string(4, '\0')),
               "9 dimensions");
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", std::string(4, '\0')),
               "outside the data section");
  expect_error(image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", std::string(6, '\0')),
               "2 bytes after the last tensor");
}

TEST(Safetensors, ShardedCheckpoints) {
  const fs::path dir = fs::temp_directory_path() / ("triad_st_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto put = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
  };
  const std::string one("\x00\x00\x80\x3f", 4);  // 1.0f
  put("model-00001-of-00002.safetensors", image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", std::string(one, 0, 4)));
  put("model-00002-of-00002.safetensors", image(R"({"b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", std::string(one, 0, 4)));
  put("model.safetensors.index.json",
      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}})");
  auto c = Checkpoint::open_dir(dir.string());
  EXPECT_EQ(c->files().size(), 2u);
  ASSERT_NE(c->find("b"), nullptr);
  EXPECT_EQ(values(*c->find("b")), (std::vector<float>{1.f}));
  EXPECT_EQ(c->tensors().size(), 2u);
  auto refused = [&](const std::string& index, const std::string& needle) {
    put("model.safetensors.index.json", index);
    try {
      Checkpoint::open_dir(dir.string());
      ADD_FAILURE() << "accepted " << index;
    } catch (const triad::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})", "not a plain file name");
  refused(R"({"weight_map": {"b": "model-00001-of-00002.safetensors"}})", "which lacks it");
  refused(R"({"weight_map": {"a": "missing.safetensors"}})", "cannot open");
  refused(R"({"weights": {}})", "no 'weight_map'");
  put("model-00002-of-00002.safetensors", image(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", std::string(one, 0, 4)));
  refused(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "x": "model-00002-of-00002.safetensors"}})",
          "is in two shards");
  fs::remove_all(dir);
  EXPECT_THROW(Checkpoint::open_dir(dir.string()), triad::Error);
}

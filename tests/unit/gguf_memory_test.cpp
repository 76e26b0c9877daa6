// Memory tests of the GGUF reader: parsing must allocate no more than a small multiple of the
// file's own size, whatever the file holds (huge packed arrays, many strings, many keys or
// tensors, arrays of arrays), and arrays of arrays beyond kMaxNestedArrays are refused.
//
// This binary replaces the global operator new/delete with counting versions (each block
// carries its size in a 16-byte header), so the peak of live heap bytes during a parse can be
// measured; the parse runs under GgufFile::open (tensor data and the file stay in the mapping)
// unless stated otherwise. The bounds below are fixed numbers from the format (bytes per
// element in the file) and the documented storage, not figures taken from a run.
// Thread-safety: the counters are atomics, but the tests measure single-threaded parses.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf_test_image.h"

namespace {

std::atomic<long long> g_live{0};
std::atomic<long long> g_peak{0};
constexpr size_t kHeader = 16;  // keeps the default new alignment (16) for the user block

void* counted_alloc(size_t n) {
  void* p = std::malloc(n + kHeader);
  if (p == nullptr) throw std::bad_alloc();
  *static_cast<size_t*>(p) = n;
  const long long live = g_live.fetch_add(static_cast<long long>(n)) + static_cast<long long>(n);
  long long peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return static_cast<char*>(p) + kHeader;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  char* block = static_cast<char*>(p) - kHeader;
  g_live.fetch_sub(static_cast<long long>(*reinterpret_cast<size_t*>(block)));
  std::free(block);
}

}  // namespace

// Replacements of the global allocation functions (the aligned forms keep the library's).
void* operator new(size_t n) { return counted_alloc(n); }
void* operator new[](size_t n) { return counted_alloc(n); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, size_t) noexcept { counted_free(p); }
void operator delete[](void* p, size_t) noexcept { counted_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }

namespace triad::gguf {
namespace {

namespace fs = std::filesystem;

// Peak heap bytes allocated by fn() beyond what was live when it started.
template <typename F>
long long peak_bytes_during(F&& fn) {
  const long long base = g_live.load();
  g_peak.store(base);
  fn();
  return g_peak.load() - base;
}

class GgufMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("triad_gguf_memory_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::vector<uint8_t>& img) {
    const std::string path = (dir_ / "x.gguf").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(img.data()), static_cast<std::streamsize>(img.size()));
    return path;
  }

  // Peak heap bytes of GgufFile::open on `img` (which must parse); the file is checked by `check`.
  template <typename Check>
  long long open_peak(const std::vector<uint8_t>& img, Check&& check) {
    const std::string path = write(img);
    std::unique_ptr<GgufFile> f;
    const long long peak = peak_bytes_during([&] { f = GgufFile::open(path); });
    check(*f);
    std::printf("  %zu-byte file: peak %lld heap bytes during open (%.2f x file)\n", img.size(), peak,
                static_cast<double>(peak) / static_cast<double>(img.size()));
    return peak;
  }

  // Peak heap bytes of a GgufFile::open on `img` that must fail with a message containing `part`.
  long long failing_open_peak(const std::vector<uint8_t>& img, const std::string& part) {
    const std::string path = write(img);
    std::string msg;
    const long long peak = peak_bytes_during([&] {
      try {
        GgufFile::open(path);
      } catch (const Error& e) {
        msg = e.what();
      }
    });
    EXPECT_NE(msg.find(part), std::string::npos) << "got: " << (msg.empty() ? "(no error)" : msg);
    return peak;
  }

  fs::path dir_;
};

constexpr size_t kMiB = 1u << 20;

TEST_F(GgufMemory, PackedU8ArrayOf8MiB) {
  // One u8 array filling 8 MiB. As one Value per element (~100 bytes) this took ~870 MB.
  constexpr size_t n = 8 * kMiB;
  RawImage r;
  r.header(0, 1).array_kv("big", 0, n);
  const size_t at = r.b.size();
  r.b.resize(at + n);
  for (size_t k = 0; k < n; ++k) r.b[at + k] = static_cast<uint8_t>(k * 7 % 251);
  const long long peak = open_peak(r.b, [&](const GgufFile& f) {
    const Value* v = f.find("big");
    ASSERT_NE(v, nullptr);
    ASSERT_EQ(v->array_size(), n);
    EXPECT_EQ(v->element(0).u, 0u);
    EXPECT_EQ(v->element(1000).u, 1000u * 7 % 251);
    EXPECT_EQ(v->int_at(n - 1), static_cast<int64_t>((n - 1) * 7 % 251));
    EXPECT_EQ(v->packed_bytes().size(), n);
  });
  // The packed copy (8 MiB) plus small change.
  EXPECT_LE(peak, static_cast<long long>(n + kMiB));
  // from_bytes copies the image first: two copies in all.
  const long long peak2 = peak_bytes_during([&] { (void)GgufFile::from_bytes(r.b.data(), r.b.size()); });
  EXPECT_LE(peak2, static_cast<long long>(2 * r.b.size() + kMiB));
}

TEST_F(GgufMemory, PackedF64ArrayIsOneCopy) {
  constexpr size_t n = kMiB / 2;  // 4 MiB of f64
  RawImage r;
  r.header(0, 1).array_kv("d", 12, n);
  for (size_t k = 0; k < n; ++k) r.pod<double>(static_cast<double>(k) * 0.5);
  const long long peak = open_peak(r.b, [&](const GgufFile& f) {
    EXPECT_EQ(f.find("d")->float_at(n - 1), static_cast<double>(n - 1) * 0.5);
  });
  EXPECT_LE(peak, static_cast<long long>(n * 8 + kMiB));
}

TEST_F(GgufMemory, StringArrayIsAtMostFourTimesTheFile) {
  // 1M strings of 4 bytes (12 file bytes each): a std::string is 32 bytes, short ones inline.
  constexpr size_t n = kMiB;
  RawImage r;
  r.header(0, 1).array_kv("s", 8, n);
  for (size_t k = 0; k < n; ++k) r.str(k % 2 ? "abcd" : "wxyz");
  const long long peak = open_peak(r.b, [&](const GgufFile& f) {
    ASSERT_EQ(f.find("s")->array_size(), n);
    EXPECT_EQ(f.find("s")->string_at(n - 1), "abcd");
  });
  EXPECT_LE(peak, static_cast<long long>(4 * r.b.size()));
  // Empty strings (8 file bytes each) stay within 32 / 8 = 4x as well.
  RawImage e;
  e.header(0, 1).array_kv("s", 8, n);
  for (size_t k = 0; k < n; ++k) e.u64(0);
  const long long peak_empty = open_peak(e.b, [&](const GgufFile& f) { EXPECT_EQ(f.find("s")->array_size(), n); });
  EXPECT_LE(peak_empty, static_cast<long long>(4 * e.b.size() + kMiB));
}

TEST_F(GgufMemory, ManySmallKeysAndTensorsStayProportional) {
  // 200000 u8 scalars under 6-byte keys (19 file bytes each).
  constexpr int n_keys = 200000;
  RawImage r;
  r.header(0, n_keys);
  char key[16];
  for (int k = 0; k < n_keys; ++k) {
    std::snprintf(key, sizeof key, "%06d", k);
    r.str(key).u32(0).u8(static_cast<uint8_t>(k));
  }
  const long long peak = open_peak(r.b, [&](const GgufFile& f) {
    EXPECT_EQ(f.metadata().size(), static_cast<size_t>(n_keys));
    EXPECT_EQ(f.get_int("199999"), 199999 % 256);
  });
  EXPECT_LE(peak, static_cast<long long>(10 * r.b.size()));

  // 100000 one-element f32 tensors (alignment 1: 30 info bytes + 4 data bytes each).
  constexpr int n_t = 100000;
  RawImage t;
  t.header(n_t, 1).str("general.alignment").u32(4).u32(1);
  for (int k = 0; k < n_t; ++k) {
    std::snprintf(key, sizeof key, "%06d", k);
    t.tensor(key, {}, 0, static_cast<uint64_t>(k) * 4);
  }
  t.zeros(static_cast<size_t>(n_t) * 4);
  const long long peak_t = open_peak(t.b, [&](const GgufFile& f) {
    EXPECT_EQ(f.tensors().size(), static_cast<size_t>(n_t));
    ASSERT_NE(f.find_tensor("099999"), nullptr);
    EXPECT_EQ(f.find_tensor("099999")->offset, 399996u);
  });
  EXPECT_LE(peak_t, static_cast<long long>(6 * t.b.size()));
}

// An array of `n` empty nested arrays (12 file bytes each) under `key`.
void nested_kv(RawImage& r, const char* key, size_t n) {
  r.array_kv(key, 9, n);
  for (size_t k = 0; k < n; ++k) r.u32(0).u64(0);
}

TEST_F(GgufMemory, NestedArraysAreBoundedByFileBytes) {
  // 60000 empty nested arrays: one Value (~104 bytes) per 12 file bytes.
  constexpr size_t n = 60000;
  RawImage r;
  r.header(0, 1);
  nested_kv(r, "nest", n);
  const long long peak = open_peak(r.b, [&](const GgufFile& f) { EXPECT_EQ(f.find("nest")->array_size(), n); });
  EXPECT_LE(peak, static_cast<long long>(n * sizeof(Value) + kMiB));
  EXPECT_LE(peak, static_cast<long long>(10 * r.b.size()));
}

TEST_F(GgufMemory, HostileNestedArraysAreRejectedCheaply) {
  // More nested arrays than kMaxNestedArrays in one array: refused before anything is reserved.
  {
    RawImage r;
    r.header(0, 1);
    nested_kv(r, "nest", kMaxNestedArrays + 1);
    const long long peak = failing_open_peak(
        r.b, "metadata key #0 'nest': array of 65537 arrays brings the file's nested arrays past the limit of 65536");
    EXPECT_LE(peak, static_cast<long long>(64 * 1024));
  }
  // Spread over several keys (and levels) the total still counts: 3 x 30000 > 65536.
  {
    RawImage r;
    r.header(0, 3);
    nested_kv(r, "a", 30000);
    nested_kv(r, "b", 30000);
    r.array_kv("c", 9, 1).u32(9).u64(30000);
    for (int k = 0; k < 30000; ++k) r.u32(0).u64(0);
    const long long peak = failing_open_peak(r.b, "metadata key #2 'c': array of 30000 arrays");
    EXPECT_LE(peak, static_cast<long long>(10 * r.b.size()));
  }
}

}  // namespace
}  // namespace triad::gguf

// libFuzzer target for the GGUF reader: parses arbitrary bytes with GgufFile::from_bytes and,
// when they parse, exercises everything a caller may touch (every metadata value through the
// typed getters, the array element accessors and to_string, every tensor's first and last data
// byte, describe_gguf), checks that each array's storage agrees with its size, and that the
// metadata survives a GgufWriter round trip unchanged.
// A triad::Error is the expected outcome for malformed input; anything else (a crash, a
// sanitizer report, another exception type, a hang or a huge allocation) is a finding.
// Also linked into gguf_fuzz_replay (replay_main.cpp), which runs the seed corpus in ctest.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/inspect.h"

namespace {

template <typename F>
void swallow(F&& fn) {
  try {
    fn();
  } catch (const triad::Error&) {
  }
}

// Calls every element accessor on the first and last element of an array (recursing into
// nested arrays the same way) and aborts when the storage views disagree with array_size().
size_t touch_value(const triad::gguf::Value& v) {
  using triad::gguf::ValueType;
  size_t sink = v.to_string(4).size();
  if (!v.is_array()) return sink;
  const size_t n = v.array_size();
  if (triad::gguf::value_type_size(v.elem_type) != 0) {
    if (v.packed_bytes().size() != n * triad::gguf::value_type_size(v.elem_type)) std::abort();
  } else if (v.elem_type == ValueType::kString) {
    if (v.strings().size() != n) std::abort();
  } else if (v.arrays().size() != n) {
    std::abort();
  }
  for (size_t k : {size_t{0}, n - 1, n}) {  // n - 1 wraps for an empty array: out of range too
    swallow([&] { sink += v.element(k).to_string(2).size(); });
    swallow([&] { sink += static_cast<size_t>(v.int_at(k)); });
    swallow([&] { sink += static_cast<size_t>(v.float_at(k) != 0); });
    swallow([&] { sink += v.bool_at(k); });
    swallow([&] { sink += v.string_at(k).size(); });
    swallow([&] { sink += touch_value(v.array_at(k)); });
  }
  return sink;
}

// Copies all metadata into a GgufWriter, serializes and re-parses it; the values must come
// back identical (compared through their full rendering and type).
void round_trip(const triad::gguf::GgufFile& f) {
  triad::gguf::GgufWriter w;
  try {
    for (const auto& [key, v] : f.metadata()) w.add_value(key, v);
  } catch (const triad::Error&) {
    return;  // the writer is stricter about general.alignment (it must fit in u32)
  }
  if (w.alignment() > 4096) return;  // a valid but huge alignment pads the image to that size
  const std::vector<uint8_t> img = w.serialize();
  const auto g = triad::gguf::GgufFile::from_bytes(img.data(), img.size());  // must not throw
  if (g->metadata().size() != f.metadata().size()) std::abort();
  for (size_t k = 0; k < f.metadata().size(); ++k) {
    const auto& [key, v] = f.metadata()[k];
    const auto& [key2, v2] = g->metadata()[k];
    if (key != key2 || v.type != v2.type || v.array_size() != v2.array_size() ||
        triad::gguf::value_type_desc(v) != triad::gguf::value_type_desc(v2) ||
        v.to_string(SIZE_MAX) != v2.to_string(SIZE_MAX))
      std::abort();
  }
}

// Calls every getter on `key`; each either returns or throws triad::Error.
void touch_key(const triad::gguf::GgufFile& f, const std::string& key) {
  swallow([&] { (void)f.get_string(key); });
  swallow([&] { (void)f.get_int(key); });
  swallow([&] { (void)f.get_float(key); });
  swallow([&] { (void)f.get_bool(key); });
  swallow([&] { (void)f.get_string(key, "d"); });
  swallow([&] { (void)f.get_int(key, 1); });
  swallow([&] { (void)f.get_float(key, 1.0); });
  swallow([&] { (void)f.get_bool(key, false); });
  swallow([&] { (void)f.get_string_array(key); });
  swallow([&] { (void)f.get_float_array(key); });
  swallow([&] { (void)f.get_int_array(key); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<triad::gguf::GgufFile> f;
  try {
    f = triad::gguf::GgufFile::from_bytes(data, size);
  } catch (const triad::Error&) {
    return 0;
  }
  size_t sink = 0;
  for (const auto& [key, v] : f->metadata()) {
    if (f->find(key) != &v) std::abort();  // the index must agree with the list
    touch_key(*f, key);
    sink += v.to_string().size() + triad::gguf::value_type_desc(v).size() + touch_value(v);
  }
  round_trip(*f);
  for (const triad::gguf::TensorInfo& t : f->tensors()) {
    if (f->find_tensor(t.name) != &t) std::abort();
    if (t.n_bytes == 0 || t.data == nullptr) std::abort();
    // Reading the ends of each tensor's range lets ASan check it lies inside the image.
    sink += t.data[0] + t.data[t.n_bytes - 1];
  }
  sink += triad::gguf::describe_gguf(*f, false).size();
  sink += triad::gguf::describe_gguf(*f, true).size();
  if (sink == 1) std::abort();  // keep the work observable
  return 0;
}

// libFuzzer target for the GGUF reader: parses arbitrary bytes with GgufFile::from_bytes and,
// when they parse, exercises everything a caller may touch (every metadata value through the
// typed getters and to_string, every tensor's first and last data byte, describe_gguf).
// A triad::Error is the expected outcome for malformed input; anything else (a crash, a
// sanitizer report, another exception type, a hang or a huge allocation) is a finding.
// Also linked into gguf_fuzz_replay (replay_main.cpp), which runs the seed corpus in ctest.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/inspect.h"

namespace {

// Calls every getter on `key`; each either returns or throws triad::Error.
void touch_key(const triad::gguf::GgufFile& f, const std::string& key) {
  auto swallow = [](auto&& fn) {
    try {
      fn();
    } catch (const triad::Error&) {
    }
  };
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
    sink += v.to_string().size() + triad::gguf::value_type_desc(v).size();
  }
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

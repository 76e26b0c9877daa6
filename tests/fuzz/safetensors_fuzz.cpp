// libFuzzer target for the safetensors reader (src/safetensors): the input is parsed as a
// safetensors file and, separately, as a shard index (model.safetensors.index.json). Any input
// must either parse or throw triad::Error: no crash, hang, leak or unbounded allocation. Every
// float tensor of a parsed file is converted to f32 (when small), so its bytes were checked.
// Also linked into safetensors_fuzz_replay (replay_main.cpp), which runs the corpus in ctest.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "safetensors/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace triad::safetensors;
  try {
    auto f = SafetensorsFile::from_bytes(data, size);
    std::vector<float> out;
    for (const Tensor& t : f->tensors()) {
      if (t.n_elements > 4096) continue;
      out.resize(t.n_elements);
      try {
        to_f32(t, out.data());
      } catch (const triad::Error&) {  // not a float type
      }
    }
  } catch (const triad::Error&) {
  }
  try {
    (void)parse_shard_index(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const triad::Error&) {
  }
  return 0;
}

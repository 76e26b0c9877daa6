// libFuzzer target for imatrix files (quant/imatrix.h): parses arbitrary bytes as GGUF and then
// as an importance matrix, and when they parse, reads every entry's importance weights for every
// matrix and checks they are finite and non-negative. triad::Error is the expected outcome for
// malformed input; a crash, sanitizer report, other exception, hang or huge allocation is a
// finding. Also linked into imatrix_fuzz_replay (replay_main.cpp), which runs the seed corpus.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "quant/imatrix.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto f = triad::gguf::GgufFile::from_bytes(data, size);
    const triad::quant::Imatrix m = triad::quant::Imatrix::from_gguf(*f);
    for (const auto& [name, e] : m.entries()) {
      for (int64_t x = 0; x < e.n_mat; ++x) {
        for (float v : m.importance(name, x))
          if (!(v >= 0) || !std::isfinite(v)) std::abort();
      }
    }
  } catch (const triad::Error&) {
  }
  return 0;
}

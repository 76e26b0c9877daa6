// libFuzzer target for the tokenizers built from untrusted GGUF metadata (src/tokenizer): when the
// bytes parse as GGUF and Tokenizer::from_gguf accepts them, encodes a fixed set of texts (spaces,
// invalid UTF-8, special-token texts, characters a charsmap may map) and the input's own last
// bytes, with and without special tokens, and decodes every result. Unigram ("t5") vocabularies
// carry a precompiled charsmap whose double array is walked on every character: its indices and
// replacement offsets are what this target aims at.
// A triad::Error is the expected outcome for malformed input; anything else (a crash, a sanitizer
// report, another exception type, a hang or a huge allocation) is a finding.
// Also linked into tokenizer_fuzz_replay (replay_main.cpp), which runs the seed corpus in ctest.
// Thread-safety: stateless; libFuzzer calls it from one thread.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<triad::Tokenizer> tok;
  try {
    const auto f = triad::gguf::GgufFile::from_bytes(data, size);
    tok = triad::Tokenizer::from_gguf(*f);
  } catch (const triad::Error&) {
    return 0;
  }
  std::vector<std::string> texts = {
      "", " ", "Hello world", "  two  spaces  ", "AB BA ab", "\xEF\xBC\xA1\xEF\xBC\xA2 full width",
      "caf\xC3\xA9 e\xCC\x81", "\xFF\xFE broken \xC3", "<s>a</s>b<unk>", "\xE2\x96\x81\xE2\x96\x81x", "tab\tnew\nline",
      std::string(300, 'a')};
  texts.emplace_back(reinterpret_cast<const char*>(data) + (size > 64 ? size - 64 : 0), size > 64 ? 64 : size);
  size_t sink = 0;
  for (const std::string& t : texts) {
    for (const bool special : {false, true}) {
      std::vector<int32_t> ids;
      try {
        ids = tok->encode(t, special, special);
      } catch (const triad::Error&) {
        continue;
      }
      for (const int32_t id : ids)
        if (id < 0 || id >= tok->n_vocab()) std::abort();
      try {
        sink += tok->decode(ids, special).size();
      } catch (const triad::Error&) {
      }
    }
  }
  if (sink == 1) std::abort();  // keep the work observable
  return 0;
}

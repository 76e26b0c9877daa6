// The tokenizer on real model files: the default Gemma 3 model ($TRIAD_MODELS_DIR/
// gemma-3-270m-q4_k_m.gguf: SPM, 262144 tokens, no space prefix, thousands of control tokens)
// must load fast and round-trip text, recognize its chat tokens, and encode long text quickly;
// the tiny test models in $TRIAD_TESTDATA/models must load, and llama-2-tiny-random (which
// carries the Llama 2 vocabulary) must tokenize exactly like ggml-vocab-llama-spm.
// Each test skips, naming the file, when its data is absent.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

fs::path env_dir(const char* var) {
  const char* d = std::getenv(var);
  return fs::path(d ? d : "");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Loaded {
  std::unique_ptr<triad::gguf::GgufFile> file;
  std::unique_ptr<triad::Tokenizer> tok;
};

Loaded load(const fs::path& p) {
  Loaded l;
  l.file = triad::gguf::GgufFile::open(p.string());
  l.tok = triad::Tokenizer::from_gguf(*l.file);
  return l;
}

TEST(TokenizerModels, Gemma3VocabularyLoadsFastAndRoundTrips) {
  const fs::path path = env_dir("TRIAD_MODELS_DIR") / "gemma-3-270m-q4_k_m.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "missing model file " << path;
  const auto t0 = std::chrono::steady_clock::now();
  const auto file = triad::gguf::GgufFile::open(path.string());
  const auto t1 = std::chrono::steady_clock::now();
  const auto tokp = triad::Tokenizer::from_gguf(*file);
  const double vocab_s = seconds_since(t1);
  std::cout << "[ gemma3   ] GGUF open " << std::chrono::duration<double>(t1 - t0).count() * 1e3
            << " ms, vocabulary load " << vocab_s * 1e3 << " ms\n";
  EXPECT_LT(vocab_s, 1.0);
  const triad::Tokenizer& tok = *tokp;
  EXPECT_EQ(tok.n_vocab(), 262144);
  EXPECT_EQ(tok.model_type(), "llama");
  EXPECT_TRUE(tok.add_bos());
  EXPECT_EQ(tok.token_text(tok.bos_id()), "<bos>");
  EXPECT_EQ(tok.token_text(tok.eos_id()), "<eos>");

  const std::string q = "What is the capital of France?";
  const std::vector<int32_t> ids = tok.encode(q, false, false);
  EXPECT_GE(ids.size(), 5u);
  EXPECT_LE(ids.size(), 10u);
  EXPECT_EQ(tok.decode(ids), q);
  EXPECT_EQ(tok.token_piece(ids[0]), "What");  // no space prefix in Gemma's vocabulary
  const std::vector<int32_t> with_bos = tok.encode(q, true, false);
  ASSERT_EQ(with_bos.size(), ids.size() + 1);
  EXPECT_EQ(with_bos[0], tok.bos_id());
  EXPECT_EQ(tok.decode(with_bos), q);
  std::string streamed;
  triad::IncrementalDecoder dec(tok);
  for (int32_t id : ids) streamed += dec.push(id);
  EXPECT_EQ(streamed + dec.flush(), q);

  // Chat markup: control tokens only with parse_special; <end_of_turn> ends generation.
  const auto sot = tok.find_token("<start_of_turn>");
  const auto eot = tok.find_token("<end_of_turn>");
  ASSERT_TRUE(sot && eot);
  EXPECT_EQ(tok.token_attr(*sot), triad::TokenAttr::kControl);
  EXPECT_TRUE(tok.is_end_of_generation(*eot));
  EXPECT_TRUE(tok.is_end_of_generation(tok.eos_id()));
  EXPECT_FALSE(tok.is_end_of_generation(*sot));
  const std::string chat = "<start_of_turn>user\n" + q + "<end_of_turn>\n<start_of_turn>model\n";
  const std::vector<int32_t> chat_ids = tok.encode(chat, true, true);
  EXPECT_EQ(std::count(chat_ids.begin(), chat_ids.end(), *sot), 2);
  EXPECT_EQ(std::count(chat_ids.begin(), chat_ids.end(), *eot), 1);
  EXPECT_EQ(tok.decode(chat_ids, true), "<bos>" + chat);
  const std::vector<int32_t> plain = tok.encode(chat, false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), *sot), 0);
  EXPECT_EQ(tok.decode(plain), chat);

  // Unicode, emoji, whitespace runs and code survive the round trip.
  const std::string mixed = "Grüße, 世界! 🦙🚀 naïve café\n\n\tdef f(x):\n    return x**2  # ok\u00a0end";
  EXPECT_EQ(tok.decode(tok.encode(mixed, false, false)), mixed);

  // Speed: ~40 KB of text.
  std::string big;
  while (big.size() < 40000) big += mixed + " The quick brown fox jumps over the lazy dog. ";
  const auto t2 = std::chrono::steady_clock::now();
  const std::vector<int32_t> big_ids = tok.encode(big, false, false);
  const double enc_s = seconds_since(t2);
  std::cout << "[ gemma3   ] encoded " << big.size() << " bytes into " << big_ids.size() << " tokens in "
            << enc_s * 1e3 << " ms\n";
  EXPECT_LT(enc_s, 0.5);
  EXPECT_EQ(tok.decode(big_ids), big);
}

TEST(TokenizerModels, LlamaTinyRandomMatchesTheLlamaSpmVocabulary) {
  const fs::path model = env_dir("TRIAD_TESTDATA") / "models" / "llama-2-tiny-random.gguf";
  const fs::path vocab = env_dir("TRIAD_TESTDATA") / "tokenizer" / "ggml-vocab-llama-spm.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "missing model file " << model;
  if (!fs::exists(vocab)) GTEST_SKIP() << "missing vocabulary file " << vocab;
  Loaded a = load(model), b = load(vocab);
  ASSERT_EQ(a.tok->n_vocab(), 32000);
  for (const std::string s : {"Hello world", " Hello World!", "3333333", "нещо на Български", "🚀 (normal) ✅",
                              "\n\n\t x", "<s>not special</s>"}) {
    EXPECT_EQ(a.tok->encode(s, true, false), b.tok->encode(s, true, false)) << s;
    EXPECT_EQ(a.tok->encode(s, true, true), b.tok->encode(s, true, true)) << s;
  }
  // With parse_special, "<s>" in the text is the BOS token.
  const auto ids = a.tok->encode("<s>x", false, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], a.tok->bos_id());
}

TEST(TokenizerModels, Stories260KVocabulary) {
  const fs::path model = env_dir("TRIAD_TESTDATA") / "models" / "stories260K.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << "missing model file " << model;
  Loaded s = load(model);
  EXPECT_EQ(s.tok->model_type(), "llama");
  EXPECT_GT(s.tok->n_vocab(), 256);
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  const auto ids = s.tok->encode(text, true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], s.tok->bos_id());
  EXPECT_EQ(s.tok->decode(ids), text);
}

}  // namespace

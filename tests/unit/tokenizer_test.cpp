// llama.cpp's tokenizer test vectors (test-tokenizer-0): for every vocabulary in
// $TRIAD_TESTDATA/tokenizer with X.gguf.inp and X.gguf.out, each input string is encoded the way
// test-tokenizer-0 does (add_special = false, parse_special = false) and compared id for id with
// its line of X.gguf.out. Vectors whose X.gguf is not in the test data skip, naming the file.
// Also checked per vocabulary: decode(encode(s)) == s where the tokenizer is lossless, and the
// incremental decoder reproduces the concatenated pieces while emitting only valid UTF-8.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;

namespace {

fs::path testdata_dir() {
  const char* d = std::getenv("TRIAD_TESTDATA");
  return fs::path(d ? d : "") / "tokenizer";
}

// The vocabulary file X.gguf: from the test data, else from $TRIAD_EXTRA_VOCAB_DIR (where
// scripts/fetch_vocabs.sh puts the vocabularies whose vectors alone are in the test data).
fs::path vocab_path(const std::string& name) {
  fs::path p = testdata_dir() / (name + ".gguf");
  if (fs::exists(p)) return p;
  if (const char* extra = std::getenv("TRIAD_EXTRA_VOCAB_DIR")) {
    fs::path q = fs::path(extra) / (name + ".gguf");
    if (fs::exists(q)) return q;
  }
  return p;
}

// Vocabulary names X for which X.gguf.inp and X.gguf.out exist (sorted).
std::vector<std::string> vocab_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(testdata_dir(), ec)) {
    const std::string f = e.path().filename().string();
    const std::string suffix = ".gguf.inp";
    if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string stem = f.substr(0, f.size() - suffix.size());
      if (fs::exists(testdata_dir() / (stem + ".gguf.out"))) names.push_back(stem);
    }
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("(no test data)");
  return names;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// test-tokenizer-0's reader: inputs are separated by "\n__ggml_vocab_test__\n" (so a case never
// includes the newline before the separator, and a final remnant without one still counts);
// expected ids are whitespace-separated, one line per input.
std::vector<Case> read_cases(const fs::path& inp, const fs::path& out) {
  const std::string raw = read_file(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < raw.size();) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<int32_t>> outputs;
  std::istringstream lines(read_file(out));
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    for (long id; ls >> id;) ids.push_back(static_cast<int32_t>(id));
    outputs.push_back(std::move(ids));
  }
  EXPECT_EQ(inputs.size(), outputs.size()) << inp << " and " << out << " hold different numbers of cases";
  std::vector<Case> cases;
  for (size_t i = 0; i < std::min(inputs.size(), outputs.size()); ++i) cases.push_back({inputs[i], outputs[i]});
  return cases;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

struct Loaded {
  std::unique_ptr<triad::Tokenizer> tok;
  std::vector<Case> cases;
};

// Each vocabulary is loaded once for the three tests that use it.
const Loaded& load_vocab(const std::string& name) {
  static std::map<std::string, Loaded> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    Loaded l;
    const auto file = triad::gguf::GgufFile::open(vocab_path(name).string());
    l.tok = triad::Tokenizer::from_gguf(*file);  // the tokenizer does not need the file afterwards
    l.cases = read_cases(testdata_dir() / (name + ".gguf.inp"), testdata_dir() / (name + ".gguf.out"));
    it = cache.emplace(name, std::move(l)).first;
  }
  return it->second;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "(no test data)") GTEST_SKIP() << "no tokenizer vectors under " << testdata_dir();
    const fs::path gguf_path = vocab_path(GetParam());
    if (!fs::exists(gguf_path)) GTEST_SKIP() << "missing vocabulary file " << gguf_path << " (only its vectors are in the test data; scripts/fetch_vocabs.sh fetches it)";
    const Loaded& l = load_vocab(GetParam());
    tok_ = l.tok.get();
    cases_ = &l.cases;
    ASSERT_FALSE(cases_->empty());
  }
  const triad::Tokenizer* tok_ = nullptr;
  const std::vector<Case>* cases_ = nullptr;
};

TEST_P(VocabVectors, EncodeMatchesLlamaCpp) {
  size_t passed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Case& c : *cases_) {
    const std::vector<int32_t> got = tok_->encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (got == c.ids) {
      ++passed;
    } else {
      ADD_FAILURE() << GetParam() << ": input '" << c.text << "'\n  expected " << show(c.ids) << "\n  got      "
                    << show(got);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ vectors  ] " << GetParam() << ": " << passed << "/" << cases_->size() << " passed in "
            << secs * 1e3 << " ms\n";
  EXPECT_EQ(passed, cases_->size());
  EXPECT_LT(secs, 0.5) << "tokenizing the whole vector file must be fast";

  // Like test-tokenizer-0, tokenize the same cases from several threads at once.
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (const Case& c : *cases_)
        if (tok_->encode(c.text, false, false) != c.ids) ++mismatches;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), static_cast<int>(3 * (cases_->size() - passed)));
}

TEST_P(VocabVectors, DecodeRoundTripsWhereLossless) {
  if (tok_->model_type() == "bert") GTEST_SKIP() << "WordPiece lowercases and drops spaces: not lossless";
  // Vocabularies with llama.cpp's space clean-up change " ," " ." " '" etc. on decode.
  const bool cleans = tok_->decode(tok_->encode("a ,", false, false)) != "a ,";
  size_t checked = 0;
  for (const Case& c : *cases_) {
    if (cleans) {
      bool touched = false;
      for (const char* pat : {" ?", " !", " .", " ,", " '"}) touched = touched || c.text.find(pat) != std::string::npos;
      if (touched) continue;
    }
    EXPECT_EQ(tok_->decode(tok_->encode(c.text, false, false)), c.text) << GetParam();
    EXPECT_EQ(tok_->decode(tok_->encode(c.text, true, false)), c.text) << GetParam() << " (with BOS/EOS)";
    ++checked;
  }
  EXPECT_GT(checked, cases_->size() / 2);
}

TEST_P(VocabVectors, IncrementalDecodingEmitsCompleteUtf8) {
  for (const Case& c : *cases_) {
    const std::vector<int32_t> ids = tok_->encode(c.text, false, false);
    triad::IncrementalDecoder dec(*tok_);
    std::string streamed, pieces;
    for (int32_t id : ids) {
      const std::string part = dec.push(id);
      EXPECT_TRUE(valid_utf8(part)) << GetParam() << ": partial output is not valid UTF-8";
      streamed += part;
      pieces += tok_->token_piece(id);
    }
    streamed += dec.flush();
    if (valid_utf8(pieces)) {
      EXPECT_EQ(streamed, pieces) << GetParam() << ": input '" << c.text << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabVectors, ::testing::ValuesIn(vocab_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace

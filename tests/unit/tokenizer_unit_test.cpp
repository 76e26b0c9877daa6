// Unit tests of the tokenizer on small vocabularies built in memory with GgufWriter: SPM score
// order and byte fallback, BPE rank order, WordPiece, special-token splitting, pieces and
// decoding, end-of-generation tokens, incremental decoding of split characters, malformed
// metadata, concurrency, and the Unicode / regex helpers.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "tokenizer/pretokenizer.h"
#include "grammar/vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using triad::Tokenizer;
using triad::TokenAttr;
using triad::gguf::GgufFile;
using triad::gguf::GgufWriter;
using Fill = std::function<void(GgufWriter&)>;

std::unique_ptr<GgufFile> make_file(const Fill& fill) {
  GgufWriter w;
  fill(w);
  const std::vector<uint8_t> bytes = w.serialize();
  return GgufFile::from_bytes(bytes.data(), bytes.size());
}

std::unique_ptr<Tokenizer> make_tokenizer(const Fill& fill) { return Tokenizer::from_gguf(*make_file(fill)); }

// Expects construction to throw triad::Error whose message contains `needle`.
void expect_load_error(const Fill& fill, const std::string& needle) {
  try {
    make_tokenizer(fill);
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const triad::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// --- a small SentencePiece vocabulary -------------------------------------------------------

const std::string kSp = "\xE2\x96\x81";  // "▁"

struct SpmVocab {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<int32_t> types{2, 3, 3};
  int32_t add(const std::string& t, float score, int32_t type = 1) {
    tokens.push_back(t);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
  SpmVocab() {
    static const char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, 6);
  }
  int32_t byte(int b) const { return 3 + b; }
  Fill fill(bool add_space_prefix = true) const {
    return [=, *this](GgufWriter& w) {
      w.add_string("tokenizer.ggml.model", "llama");
      w.add_string_array("tokenizer.ggml.tokens", tokens);
      w.add_f32_array("tokenizer.ggml.scores", scores);
      w.add_i32_array("tokenizer.ggml.token_type", types);
      w.add_bool("tokenizer.ggml.add_space_prefix", add_space_prefix);
    };
  }
};

struct SpmFixture : ::testing::Test {
  SpmVocab v;
  int32_t sp = v.add(kSp, -5), a = v.add("a", -5), b = v.add("b", -5), c = v.add("c", -5);
  int32_t sp_a = v.add(kSp + "a", -1), ab = v.add("ab", -0.1f), bc = v.add("bc", -3);
  int32_t sp_ab = v.add(kSp + "ab", -4), abc = v.add("abc", -0.2f), aa = v.add("aa", -1);
  int32_t sot = v.add("<start_of_turn>", 0, 3), eot = v.add("<end_of_turn>", 0, 3);
  int32_t ux = v.add("<x>", 0, 4), uxy = v.add("<xy>", 0, 4), xy = v.add("xy", 0, 4);
};

TEST_F(SpmFixture, MergesHighestScoreFirst) {
  auto tok = make_tokenizer(v.fill(true));
  // "▁abc": ab (-0.1) merges first, then abc (-0.2); "▁ab" (-4) never wins.
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{sp, abc}));
  // add_special prepends BOS (llama default add_bos = true), no EOS.
  EXPECT_EQ(tok->encode("abc", true, false), (std::vector<int32_t>{1, sp, abc}));
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("", false, false), std::vector<int32_t>{});
  EXPECT_EQ(tok->encode("", true, false), std::vector<int32_t>{1});
}

TEST_F(SpmFixture, EqualScoresMergeLeftmostFirst) {
  auto tok = make_tokenizer(v.fill(false));
  EXPECT_EQ(tok->encode("aaa", false, false), (std::vector<int32_t>{aa, a}));
}

TEST_F(SpmFixture, SpacesBecomeMarksAndUnknownCharactersFallBackToBytes) {
  auto tok = make_tokenizer(v.fill(true));
  // " a" -> "▁▁a": "▁a" merges, the first "▁" stays alone.
  EXPECT_EQ(tok->encode(" a", false, false), (std::vector<int32_t>{sp, sp_a}));
  // "é" (C3 A9) has no token: byte fallback.
  EXPECT_EQ(tok->encode("\xC3\xA9", false, false), (std::vector<int32_t>{sp, v.byte(0xC3), v.byte(0xA9)}));
  // Arbitrary bytes (invalid UTF-8) are kept as byte tokens and decode back.
  const std::string junk = "a\xFF\xC3";
  EXPECT_EQ(tok->decode(tok->encode(junk, false, false)), junk);
}

TEST_F(SpmFixture, SpecialTokens) {
  auto tok = make_tokenizer(v.fill(true));
  // Control tokens only with parse_special; after a special token the text gets a space prefix.
  EXPECT_EQ(tok->encode("<start_of_turn>ab", false, true), (std::vector<int32_t>{sot, sp_ab}));
  const auto plain = tok->encode("<start_of_turn>ab", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), sot), 0);
  EXPECT_EQ(tok->decode(plain), "<start_of_turn>ab");
  // User-defined tokens are always recognized; the longest text is cut out first, and a shorter
  // special token never matches inside it ("xy" inside "<xy>").
  EXPECT_EQ(tok->encode("<xy>", false, false), std::vector<int32_t>{uxy});
  const auto mixed = tok->encode("a<x>xy<xy>", false, false);
  EXPECT_EQ(mixed, (std::vector<int32_t>{sp_a, ux, xy, uxy}));
  EXPECT_EQ(tok->decode(mixed), "a<x>xy<xy>");
}

TEST_F(SpmFixture, PiecesAndDecode) {
  auto tok = make_tokenizer(v.fill(true));
  EXPECT_EQ(tok->token_piece(sp_ab), " ab");
  EXPECT_EQ(tok->token_piece(v.byte('A')), "A");
  EXPECT_EQ(tok->token_piece(sot), "");
  EXPECT_EQ(tok->token_piece(sot, true), "<start_of_turn>");
  EXPECT_EQ(tok->token_piece(ux), "<x>");  // user-defined: always its text
  EXPECT_EQ(tok->decode({sp_ab, c}), "abc");   // the space prefix is removed once
  EXPECT_EQ(tok->decode({1, sp_ab, c}), "abc");  // also behind an unrendered BOS
  EXPECT_EQ(tok->decode({1, sp_ab}, true), "<s> ab");
  EXPECT_EQ(tok->decode({sot, sp_ab}), " ab");
  EXPECT_THROW(tok->token_piece(-1), triad::Error);
  EXPECT_THROW(tok->decode({tok->n_vocab()}), triad::Error);
  EXPECT_THROW(tok->token_text(tok->n_vocab()), triad::Error);
}

TEST_F(SpmFixture, ControlTokensRenderedOnRequest) {
  // A tool-call marker held as a control token (as llama.cpp's converter makes DeepSeek's
  // <｜tool▁calls▁begin｜>): rendered, and generable under a grammar, only where asked for.
  auto tok = make_tokenizer(v.fill(true));
  triad::IncrementalDecoder plain(*tok), shown(*tok, false, {sot});
  EXPECT_EQ(plain.push(sot), "");
  EXPECT_EQ(shown.push(sot), "<start_of_turn>");
  EXPECT_EQ(shown.push(eot), "");  // only the named ones
  const auto off = triad::grammar::Vocab::from_tokenizer(*tok);
  const auto on = triad::grammar::Vocab::from_tokenizer(*tok, {sot});
  EXPECT_EQ(off->piece(sot), "");
  EXPECT_EQ(on->piece(sot), "<start_of_turn>");
  EXPECT_EQ(on->piece(eot), "");
}

TEST_F(SpmFixture, SpecialIdsAttributesAndEndOfGeneration) {
  auto tok = make_tokenizer(v.fill(true));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->eot_id(), eot);  // detected by its text
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_TRUE(tok->is_end_of_generation(eot));
  EXPECT_FALSE(tok->is_end_of_generation(sot));
  EXPECT_FALSE(tok->is_end_of_generation(a));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  EXPECT_EQ(tok->token_attr(0), TokenAttr::kUnknown);
  EXPECT_EQ(tok->token_attr(sot), TokenAttr::kControl);
  EXPECT_EQ(tok->token_attr(ux), TokenAttr::kUserDefined);
  EXPECT_EQ(tok->token_attr(v.byte(0)), TokenAttr::kByte);
  EXPECT_EQ(tok->token_attr(a), TokenAttr::kNormal);
  EXPECT_EQ(tok->find_token("<end_of_turn>"), eot);
  EXPECT_EQ(tok->find_token("nope"), std::nullopt);
  EXPECT_EQ(tok->token_text(abc), "abc");
  EXPECT_EQ(tok->model_type(), "llama");
}

TEST_F(SpmFixture, IncrementalDecoderHoldsSplitCharacters) {
  auto tok = make_tokenizer(v.fill(false));
  const std::string emoji = "\xF0\x9F\x98\x80";  // U+1F600, four byte-fallback tokens
  const auto ids = tok->encode(emoji, false, false);
  ASSERT_EQ(ids, (std::vector<int32_t>{v.byte(0xF0), v.byte(0x9F), v.byte(0x98), v.byte(0x80)}));
  triad::IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), emoji);
  EXPECT_EQ(dec.push(a), "a");
  EXPECT_EQ(dec.flush(), "");
}

TEST_F(SpmFixture, IncrementalDecoderReplacesWhatCannotComplete) {
  auto tok = make_tokenizer(v.fill(false));
  const std::string fffd = "\xEF\xBF\xBD";
  triad::IncrementalDecoder dec(*tok);
  EXPECT_EQ(dec.push(v.byte(0xFF)), fffd);           // never valid
  EXPECT_EQ(dec.push(v.byte(0xF0)), "");             // could still complete
  EXPECT_EQ(dec.push(a), fffd + "a");                // ...but does not
  EXPECT_EQ(dec.push(v.byte(0xE0)), "");
  EXPECT_EQ(dec.push(v.byte(0x80)), fffd + fffd);    // E0 80 is an overlong start
  EXPECT_EQ(dec.push(v.byte(0xE2)), "");
  EXPECT_EQ(dec.push(v.byte(0x82)), "");
  EXPECT_EQ(dec.flush(), fffd);                      // the stream ended inside a character
  EXPECT_EQ(dec.flush(), "");
  auto spm = make_tokenizer(v.fill(true));
  triad::IncrementalDecoder spaced(*spm);
  EXPECT_EQ(spaced.push(sp_ab), " ab");  // streamed pieces keep their leading space
}

// --- byte-level BPE --------------------------------------------------------------------------

struct BpeVocab {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges{"a b", "\xC4\xA0 a", "\xC4\xA0" "a b"};  // "Ġ" is U+0120
  BpeVocab() {
    for (int b = 0; b < 256; ++b) {
      std::string t;
      triad::tok::utf8_append(t, triad::tok::byte_to_cp(static_cast<uint8_t>(b)));
      tokens.push_back(t);
      types.push_back(1);
    }
    for (const char* t : {"ab", "\xC4\xA0" "a", "\xC4\xA0" "ab"}) {
      tokens.push_back(t);
      types.push_back(1);
    }
    tokens.push_back("<|endoftext|>");
    types.push_back(3);
  }
  int32_t id(const std::string& t) const {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), t) - tokens.begin());
  }
  Fill fill(const std::string& pre = "gpt-2") const {
    return [=, *this](GgufWriter& w) {
      w.add_string("tokenizer.ggml.model", "gpt2");
      w.add_string("tokenizer.ggml.pre", pre);
      w.add_string_array("tokenizer.ggml.tokens", tokens);
      w.add_i32_array("tokenizer.ggml.token_type", types);
      w.add_string_array("tokenizer.ggml.merges", merges);
      w.add_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tokens.size() - 1));
      w.add_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tokens.size() - 1));
    };
  }
};

TEST(BpeTokenizer, MergesByRankWithinPreTokenizedWords) {
  BpeVocab v;
  auto tok = make_tokenizer(v.fill());
  EXPECT_EQ(tok->model_type(), "gpt2");
  EXPECT_FALSE(tok->add_bos());
  // " ab" is one word "Ġab": "a b" (rank 0) beats "Ġ a" (rank 1), and "Ġ ab" is no merge.
  EXPECT_EQ(tok->encode(" ab", false, false), (std::vector<int32_t>{v.id("\xC4\xA0"), v.id("ab")}));
  // "a ab" splits into "a" and " ab" before merging.
  EXPECT_EQ(tok->encode("a ab", false, false), (std::vector<int32_t>{v.id("a"), v.id("\xC4\xA0"), v.id("ab")}));
  // Bytes outside ASCII go through the byte-level mapping and decode back.
  const std::string s = "x\xC3\xA9 \xF0\x9F\xA6\x99!";
  EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s);
  // Invalid UTF-8 becomes U+FFFD before pre-tokenizing.
  EXPECT_EQ(tok->decode(tok->encode("a\xFF", false, false)), "a\xEF\xBF\xBD");
  // Control token only with parse_special; it is the EOS and ends generation.
  const int32_t eot = v.id("<|endoftext|>");
  EXPECT_EQ(tok->encode("ab<|endoftext|>", false, true), (std::vector<int32_t>{v.id("ab"), eot}));
  EXPECT_NE(tok->encode("ab<|endoftext|>", false, false).back(), eot);
  EXPECT_TRUE(tok->is_end_of_generation(eot));
  // gpt-2 cleans " ," on decode, as llama.cpp does.
  EXPECT_EQ(tok->decode(tok->encode("a , b", false, false)), "a, b");
}

TEST(BpeTokenizer, UnknownPreTokenizerFallsBackToDefault) {
  BpeVocab v;
  auto tok = make_tokenizer(v.fill("no-such-pre"));
  EXPECT_EQ(tok->pre_type(), "default");
  EXPECT_EQ(tok->decode(tok->encode("ab ab 123", false, false)), "ab ab 123");
}

// --- WordPiece -------------------------------------------------------------------------------

TEST(WpmTokenizer, BasicTokenizationAndGreedyLongestMatch) {
  const std::vector<std::string> tokens{"[PAD]", "[UNK]", "[CLS]", "[SEP]", kSp + "hello", kSp + "he", "llo",
                                        kSp + ",", kSp + "\xE4\xB8\x96", kSp + "\xE7\x95\x8C", kSp + "cafe"};
  auto tok = make_tokenizer([&](GgufWriter& w) {
    w.add_string("tokenizer.ggml.model", "bert");
    w.add_string_array("tokenizer.ggml.tokens", tokens);
    w.add_i32_array("tokenizer.ggml.token_type", {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1});
    w.add_u32("tokenizer.ggml.unknown_token_id", 1);
    w.add_u32("tokenizer.ggml.bos_token_id", 2);
    w.add_u32("tokenizer.ggml.seperator_token_id", 3);
  });
  // Lowercased; "," split off; "world" unknown; CJK characters are words of their own.
  EXPECT_EQ(tok->encode("Hello, WORLD \xE4\xB8\x96\xE7\x95\x8C", false, false),
            (std::vector<int32_t>{4, 7, 1, 8, 9}));
  EXPECT_EQ(tok->encode("hellollo", false, false), (std::vector<int32_t>{4, 6}));  // longest first
  EXPECT_EQ(tok->encode("hex", false, false), std::vector<int32_t>{1});            // no full match
  EXPECT_EQ(tok->encode("Caf\xC3\xA9", false, false), std::vector<int32_t>{10});    // accent stripped
  EXPECT_EQ(tok->encode("hello", true, false), (std::vector<int32_t>{2, 4, 3}));    // [CLS] .. [SEP]
  EXPECT_EQ(tok->decode({4, 6}), " hellollo");
}

// --- malformed metadata ----------------------------------------------------------------------

TEST(TokenizerMetadata, MalformedVocabulariesGiveCleanErrors) {
  const std::vector<std::string> toks{"<unk>", "<s>", "</s>", "a"};
  auto base = [&](GgufWriter& w) { w.add_string("tokenizer.ggml.model", "llama"); };
  expect_load_error([](GgufWriter& w) { w.add_string_array("tokenizer.ggml.tokens", {"a"}); }, "tokenizer.ggml.model");
  expect_load_error(base, "tokenizer.ggml.tokens");
  expect_load_error([&](GgufWriter& w) { base(w); w.add_i32_array("tokenizer.ggml.tokens", {1, 2}); },
                    "tokenizer.ggml.tokens");
  expect_load_error([&](GgufWriter& w) { base(w); w.add_string_array("tokenizer.ggml.tokens", {}); },
                    "tokenizer.ggml.tokens");
  expect_load_error(
      [&](GgufWriter& w) {
        base(w);
        w.add_string_array("tokenizer.ggml.tokens", toks);
        w.add_f32_array("tokenizer.ggml.scores", {0, 0, 0});
      },
      "tokenizer.ggml.scores");
  expect_load_error(
      [&](GgufWriter& w) {
        base(w);
        w.add_string_array("tokenizer.ggml.tokens", toks);
        w.add_string_array("tokenizer.ggml.scores", {"x", "y", "z", "w"});
      },
      "tokenizer.ggml.scores");
  expect_load_error(
      [&](GgufWriter& w) {
        base(w);
        w.add_string_array("tokenizer.ggml.tokens", toks);
        w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3});
      },
      "tokenizer.ggml.token_type");
  expect_load_error(
      [&](GgufWriter& w) {
        base(w);
        w.add_string_array("tokenizer.ggml.tokens", toks);
        w.add_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 9});
      },
      "tokenizer.ggml.token_type");
  expect_load_error(
      [&](GgufWriter& w) {
        base(w);
        w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "a"});
      },
      "duplicate token");
  expect_load_error(
      [&](GgufWriter& w) {
        w.add_string("tokenizer.ggml.model", "wordsmith");
        w.add_string_array("tokenizer.ggml.tokens", toks);
      },
      "wordsmith");
  // BPE: merges are required and must be "left right".
  auto bpe = [&](GgufWriter& w) {
    w.add_string("tokenizer.ggml.model", "gpt2");
    w.add_string("tokenizer.ggml.pre", "gpt-2");
    w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  };
  expect_load_error(bpe, "tokenizer.ggml.merges");
  expect_load_error([&](GgufWriter& w) { bpe(w); w.add_string_array("tokenizer.ggml.merges", {"a b", "ab"}); },
                    "tokenizer.ggml.merges");
  expect_load_error([&](GgufWriter& w) { bpe(w); w.add_string_array("tokenizer.ggml.merges", {"a "}); },
                    "tokenizer.ggml.merges");
  // add_bos_token without any BOS id (gpt2's default 11 is outside this vocabulary).
  expect_load_error(
      [&](GgufWriter& w) {
        bpe(w);
        w.add_string_array("tokenizer.ggml.merges", {"a b"});
        w.add_bool("tokenizer.ggml.add_bos_token", true);
      },
      "BOS");
  // An out-of-range special id is ignored (llama.cpp warns and keeps the default).
  auto tok = make_tokenizer([&](GgufWriter& w) {
    base(w);
    w.add_string_array("tokenizer.ggml.tokens", toks);
    w.add_u32("tokenizer.ggml.eos_token_id", 1000);
  });
  EXPECT_EQ(tok->eos_id(), 2);
}

// --- concurrency -----------------------------------------------------------------------------

TEST(TokenizerThreads, ConcurrentEncodeAndDecodeAgree) {
  BpeVocab v;
  auto tok = make_tokenizer(v.fill());
  const std::string text = "ab a ab, x\xC3\xA9 <|endoftext|> 123 ab";
  const auto expected = tok->encode(text, true, true);
  std::vector<int> bad(2, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        if (tok->encode(text, true, true) != expected) ++bad[t];
        if (tok->decode(expected, true) != tok->decode(expected, true)) ++bad[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad[0] + bad[1], 0);
}

// --- robustness ------------------------------------------------------------------------------

bool is_valid_utf8(const std::string& s) { return triad::tok::sanitize_utf8(s) == s; }

TEST(TokenizerRobustness, ArbitraryBytesNeverBreakEncodeOrDecode) {
  SpmVocab sv;
  for (const char* t : {"\xE2\x96\x81", "a", "b", "ab", "<ctl>"}) sv.add(t, -1, std::string(t) == "<ctl>" ? 3 : 1);
  BpeVocab bv;
  auto spm = make_tokenizer(sv.fill(true));
  auto bpe = make_tokenizer(bv.fill("qwen2"));  // qwen2 does no decode clean-up
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  const char alphabet[] = {'a', 'b', ' ', '\n', '<', 'c', 't', 'l', '>', '\xE2', '\x96', '\x81', '\xC3', '\xA9',
                           '\xF0', '\x9F', '\x98', '\x80', '\xFF', '\x00', '1', '\'', 's'};
  for (int iter = 0; iter < 400; ++iter) {
    std::string text;
    const size_t len = next() % 40;
    for (size_t i = 0; i < len; ++i) text.push_back(alphabet[(next() >> 8) % sizeof(alphabet)]);
    for (bool special : {false, true}) {
      const auto ids = spm->encode(text, special, special);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < spm->n_vocab());
      // SPM with byte fallback is lossless on valid UTF-8 without a literal "▁" (which decodes as
      // a space); invalid bytes next to a space can swallow the "▁" into byte tokens, as in
      // llama.cpp.
      const bool plain = is_valid_utf8(text) && text.find("\xE2\x96\x81") == std::string::npos;
      if (!special && plain) {
        EXPECT_EQ(spm->decode(ids), text);
      }
      const auto bids = bpe->encode(text, special, special);
      for (int32_t id : bids) ASSERT_TRUE(id >= 0 && id < bpe->n_vocab());
      if (!special) {
        EXPECT_EQ(bpe->decode(bids), triad::tok::sanitize_utf8(text));
      }
      triad::IncrementalDecoder dec(*spm, special);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string part = dec.push(id);
        EXPECT_TRUE(is_valid_utf8(part));
        streamed += part;
      }
      streamed += dec.flush();
      EXPECT_TRUE(is_valid_utf8(streamed));
      if (!special && plain) {
        EXPECT_EQ(streamed, " " + text);  // streaming keeps the prefix space
      }
    }
  }
}

// --- helpers ---------------------------------------------------------------------------------

TEST(TokenizerUnicode, Utf8ClassificationAndTables) {
  using triad::tok::Utf8Seq;
  size_t len = 0;
  EXPECT_EQ(triad::tok::utf8_classify("\xE2\x82\xAC", 0, len), Utf8Seq::kValid);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(triad::tok::utf8_classify("\xE2\x82", 0, len), Utf8Seq::kIncomplete);
  EXPECT_EQ(triad::tok::utf8_classify("\xE2\x41", 0, len), Utf8Seq::kInvalid);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(triad::tok::utf8_classify("\xED\xA0\x80", 0, len), Utf8Seq::kInvalid);  // surrogate
  EXPECT_EQ(triad::tok::utf8_classify("\xC0\xAF", 0, len), Utf8Seq::kInvalid);      // overlong
  EXPECT_EQ(triad::tok::sanitize_utf8("a\x80\xF0\x9F"), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(triad::tok::utf8_to_cps("\xC3\xA4\xF0\x9F\x98\x80"), (std::vector<uint32_t>{0xE4, 0x1F600}));

  using namespace triad::tok;
  EXPECT_TRUE(cp_flags('A') & kCpLetter);
  EXPECT_TRUE(cp_flags(0x4E16) & kCpLetter);  // 世
  EXPECT_TRUE(cp_flags('7') & kCpNumber);
  EXPECT_TRUE(cp_flags(0x0663) & kCpNumber);  // Arabic-Indic three
  EXPECT_TRUE(cp_flags(',') & kCpPunctuation);
  EXPECT_TRUE(cp_flags('$') & kCpSymbol);
  EXPECT_TRUE(cp_flags(0x0301) & kCpMark);
  EXPECT_TRUE(cp_flags(0x3000) & kCpWhitespace);
  EXPECT_TRUE(cp_flags('\n') & kCpWhitespace);
  EXPECT_FALSE(cp_flags(0x1C) & kCpWhitespace);
  EXPECT_TRUE(cp_flags(0x0378) & kCpControl);  // unassigned counts as C
  EXPECT_EQ(cp_lower('A'), uint32_t('a'));
  EXPECT_EQ(cp_lower(0xC4), 0xE4u);     // Ä -> ä
  EXPECT_EQ(cp_lower(0x0130), uint32_t('i'));  // İ -> first codepoint of "i̇"
  auto nfd = [](uint32_t cp) {
    std::vector<uint32_t> v;
    cp_nfd_append(cp, v);
    return v;
  };
  EXPECT_EQ(nfd(0xE9), (std::vector<uint32_t>{'e', 0x0301}));
  EXPECT_EQ(nfd(0x1E69), (std::vector<uint32_t>{'s', 0x0323, 0x0307}));  // recursive, canonically ordered
  EXPECT_EQ(nfd(0xAC00), (std::vector<uint32_t>{0x1100, 0x1161}));       // Hangul LV
  EXPECT_EQ(nfd(0xAC01), (std::vector<uint32_t>{0x1100, 0x1161, 0x11A8}));  // Hangul LVT
  EXPECT_EQ(nfd('x'), (std::vector<uint32_t>{'x'}));
  EXPECT_TRUE(cp_is_nonspacing_mark(0x0301));
  EXPECT_TRUE(cp_is_nonspacing_mark(0xFE0F));    // variation selector
  EXPECT_FALSE(cp_is_nonspacing_mark(0x20E3));   // enclosing keycap (Me) stays
  EXPECT_FALSE(cp_is_nonspacing_mark(0x093E));   // Devanagari vowel sign AA (Mc) stays
  EXPECT_FALSE(cp_is_nonspacing_mark('a'));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(cp_to_byte(byte_to_cp(static_cast<uint8_t>(b))), b);
  EXPECT_EQ(byte_to_cp(' '), 0x120u);  // "Ġ"
  EXPECT_EQ(cp_to_byte('a'), 'a');
  EXPECT_EQ(cp_to_byte(0x20), -1);
}

TEST(TokenizerRegex, PatternsAreAdaptedLikeLlamaCppCategories) {
  using triad::tok::adapt_pattern;
  EXPECT_EQ(adapt_pattern(R"(\p{Lu}+\p{Ll}\p{N})"), R"(\p{L}+\p{L}\p{N})");
  EXPECT_EQ(adapt_pattern(R"(\d{3}[\d.])"), R"([0-9]{3}[0-9.])");
  EXPECT_EQ(adapt_pattern(R"([\]\d])"), R"([\]0-9])");
  // The pre-tokenizer keeps unmatched gaps and splits at empty matches.
  triad::tok::PreTokenizer pre;
  pre.init({R"(\p{L}+)"});
  std::vector<std::string_view> words;
  pre.split("ab, cd", words);
  EXPECT_EQ(words, (std::vector<std::string_view>{"ab", ", ", "cd"}));
  triad::tok::PreTokenizer groups;
  groups.init({R"((?=(\d{3})+(?!\d)))"});
  words.clear();
  groups.split("1234567", words);
  EXPECT_EQ(words, (std::vector<std::string_view>{"1", "234", "567"}));
  EXPECT_THROW(pre.init({"(unclosed"}), triad::Error);
}

}  // namespace

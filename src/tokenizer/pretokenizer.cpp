// BPE pre-tokenizer regexes and the PCRE2 splitter (see pretokenizer.h).
// The pattern strings and the name -> pattern-set table are the public facts of llama.cpp's
// llm_tokenizer_bpe / llama_vocab::load (non-ASCII characters written as \x{...}).
// Thread-safety: compiled patterns are read-only; split() uses per-thread match data.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <utility>

#include "base/error.h"
#include "tokenizer/unicode.h"

namespace triad::tok {

namespace {

// GPT-2's pattern as llama.cpp writes it (its hand-written splitter also accepts a lone \s+,
// which the gap rule below reproduces).
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
const char* const kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kQwen35 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Cased letters (Lu, Ll, Lt) as DeepSeek's tokenizer.json lists them.
const char* const kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
const char* const kDeepseekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re";
const char* const kDeepseekCjk = R"re([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
const char* const kDeepseek3Words =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kPoro = R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";
const char* const kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kGpt4o =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kSeedCoder =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kBailing =
    R"re('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)re";

enum class Set {
  kDefault, kLlama3, kDeepseekLlm, kDeepseek3, kDeepseekCoder, kFalcon, kStarcoder, kGpt2,
  kQwen2, kQwen35, kPoro, kViking, kTekken, kGpt4o, kSeedCoder, kBailing, kChameleon, kGemma4,
};

std::vector<std::string> patterns_of(Set s) {
  switch (s) {
    case Set::kDefault:
      return {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"};
    case Set::kLlama3: return {kLlama3};
    case Set::kDeepseekLlm:
      return {"[\\r\\n]", kDeepseekLetters, kDeepseekPunct, R"re(\s+$)re", kDeepseekCjk, R"re(\p{N}+)re"};
    case Set::kDeepseek3:
      return {R"re(\p{N}{1,3})re", R"re([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)re", kDeepseek3Words};
    case Set::kDeepseekCoder:
      return {"[\\r\\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"};
    case Set::kFalcon: return {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"};
    case Set::kStarcoder: return {R"re(\p{N})re", kGpt2};
    case Set::kGpt2: return {kGpt2};
    case Set::kQwen2: return {kQwen2};
    case Set::kQwen35: return {kQwen35};
    case Set::kPoro: return {kPoro};
    case Set::kViking: return {kPoro, R"re(\p{N})re"};
    case Set::kTekken: return {kTekken};
    case Set::kGpt4o: return {kGpt4o};
    case Set::kSeedCoder: return {kSeedCoder};
    case Set::kBailing: return {kBailing};
    case Set::kChameleon:
      return {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", R"re(\p{N})re",
              R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2};
    case Set::kGemma4: return {"[^\\n]+|[\\n]+"};
  }
  return {};
}

struct Entry {
  const char* names;  // '|'-separated aliases; the first is the canonical name
  Set set;
  bool clean_spaces;
  bool ignore_merges;
  bool add_bos;
};

// tokenizer.ggml.pre values, as llama.cpp maps them.
const Entry kTable[] = {
    {"default", Set::kDefault, true, false, false},
    {"llama-bpe|llama3|llama-v3|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|jina-v5-nano", Set::kLlama3, true, true, true},
    {"dbrx|smaug-bpe", Set::kLlama3, true, false, false},
    {"deepseek-llm", Set::kDeepseekLlm, false, false, false},
    {"deepseek-coder", Set::kDeepseekCoder, false, false, false},
    {"deepseek-v3|hunyuan-dense|joyai-llm|hy_v4", Set::kDeepseek3, false, false, false},
    {"falcon", Set::kFalcon, true, false, false},
    {"mpt", Set::kGpt2, true, false, false},
    {"starcoder|refact|codeshell|exaone|minerva-7b|mellum2", Set::kStarcoder, true, false, false},
    {"command-r|smollm", Set::kStarcoder, false, false, false},
    {"gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|modern-bert|jina-v1-en|"
     "jina-v2-code|roberta-bpe|olmo|jais|exaone4",
     Set::kGpt2, true, false, false},
    {"trillion|granite-docling", Set::kGpt2, false, false, false},
    {"qwen2|deepseek-r1-qwen|kormo|f2llmv2|hunyuan|grok-2|solar-open", Set::kQwen2, false, false, false},
    {"stablelm2|megrez", Set::kQwen2, true, false, false},
    {"qwen35", Set::kQwen35, false, false, false},
    {"glm4|chatglm-bpe", Set::kLlama3, true, false, false},
    {"poro-chat", Set::kPoro, false, false, false},
    {"bloom|gpt3-finnish", Set::kPoro, true, false, false},
    {"viking", Set::kViking, false, false, false},
    {"tekken", Set::kTekken, false, true, true},
    {"gpt-4o|llama4|kanana2|talkie|minimax-m2", Set::kGpt4o, false, false, false},
    {"seed-coder", Set::kSeedCoder, false, false, false},
    {"bailingmoe|bailingmoe2|llada-moe", Set::kBailing, false, false, false},
    {"chameleon", Set::kChameleon, false, false, true},
    {"gemma4|granite-embed-multi-311m", Set::kGemma4, true, false, true},
};

bool name_in(std::string_view names, std::string_view pre) {
  size_t start = 0;
  while (start <= names.size()) {
    size_t bar = names.find('|', start);
    if (bar == std::string_view::npos) bar = names.size();
    if (names.substr(start, bar - start) == pre) return true;
    start = bar + 1;
  }
  return false;
}

}  // namespace

bool pre_type_config(std::string_view pre, PreTypeConfig& out) {
  const Entry* found = nullptr;
  for (const Entry& e : kTable) {
    if (name_in(e.names, pre)) {
      found = &e;
      break;
    }
  }
  const bool known = found != nullptr;
  if (!known) found = &kTable[0];
  const std::string_view names(found->names);
  out = PreTypeConfig{};
  out.name = std::string(names.substr(0, names.find('|')));
  out.regexes = patterns_of(found->set);
  out.clean_spaces = found->clean_spaces;
  out.ignore_merges = found->ignore_merges;
  out.add_bos = found->add_bos;
  if (found->set == Set::kGemma4) {
    out.byte_encode = false;
    out.escape_whitespaces = true;
  }
  return known;
}

std::string adapt_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (n == 'p' && i + 2 < p.size() && p[i + 2] == '{') {
        const size_t close = p.find('}', i + 3);
        if (close != std::string_view::npos) {
          std::string_view prop = p.substr(i + 3, close - i - 3);
          if (prop == "Lu" || prop == "Ll" || prop == "Lt" || prop == "Lm" || prop == "Lo") prop = "L";
          out += "\\p{";
          out += prop;
          out += '}';
          i = close;
          continue;
        }
      }
      if (n == 'd') {
        out += in_class ? "0-9" : "[0-9]";
        ++i;
        continue;
      }
      if (n == 'D' && !in_class) {
        out += "[^0-9]";
        ++i;
        continue;
      }
      out += c;
      out += n;
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  std::string pattern;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::init(const std::vector<std::string>& patterns) {
  regexes_.clear();
  for (const std::string& pat : patterns) {
    auto r = std::make_unique<Regex>();
    r->pattern = adapt_pattern(pat);
    int err = 0;
    PCRE2_SIZE err_off = 0;
    r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r->pattern.data()), r->pattern.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_off, nullptr);
    if (r->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      fail("pre-tokenizer regex '", pat, "' does not compile at offset ", err_off, ": ",
           reinterpret_cast<const char*>(msg));
    }
    r->jit = pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
    regexes_.push_back(std::move(r));
  }
}

namespace {

struct Piece {
  size_t off;
  size_t len;
};

// RAII for the per-call PCRE2 objects.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jstack = nullptr;
  MatchState() {
    md = pcre2_match_data_create(4, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    jstack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (mctx && jstack) pcre2_jit_stack_assign(mctx, nullptr, jstack);
    TRIAD_CHECK(md && mctx, "pre-tokenizer: out of memory for PCRE2 match data");
  }
  ~MatchState() {
    if (jstack) pcre2_jit_stack_free(jstack);
    if (mctx) pcre2_match_context_free(mctx);
    if (md) pcre2_match_data_free(md);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;
};

// Runs one match; returns false on no match, throws on an engine error.
bool match_at(const pcre2_code* code, bool jit, std::string_view subject, size_t start, uint32_t opts,
              MatchState& st, const std::string& pattern, size_t& ms, size_t& me) {
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc = pcre2_match(code, s, subject.size(), start, opts | PCRE2_NO_UTF_CHECK, st.md, st.mctx);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && jit) {
    // E.g. the JIT stack limit on pathological input: retry with the interpreter.
    rc = pcre2_match(code, s, subject.size(), start, opts | PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st.md, st.mctx);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    fail("pre-tokenizer regex '", pattern, "' failed: ", reinterpret_cast<const char*>(msg));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
  ms = ov[0];
  me = ov[1];
  return true;
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& words) const {
  if (text.empty()) return;
  std::vector<Piece> pieces{{0, text.size()}}, next;
  thread_local MatchState st;  // one per thread: matches within a thread run one at a time
  for (const auto& re : regexes_) {
    next.clear();
    for (const Piece& pc : pieces) {
      const std::string_view subject = text.substr(pc.off, pc.len);
      size_t pos = 0, gap = 0;
      bool prev_empty = false;
      while (pos <= subject.size()) {
        size_t ms = 0, me = 0;
        const uint32_t opts = prev_empty ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
        if (!match_at(re->code, re->jit, subject, pos, opts, st, re->pattern, ms, me)) {
          if (!prev_empty || pos >= subject.size()) break;
          // After an empty match, continue the search one character further on.
          pos += utf8_len_from_lead(static_cast<unsigned char>(subject[pos]));
          prev_empty = false;
          continue;
        }
        if (ms > gap) next.push_back({pc.off + gap, ms - gap});
        if (me > ms) next.push_back({pc.off + ms, me - ms});
        gap = me;  // an empty match splits here
        prev_empty = me == ms;
        pos = me;
      }
      if (gap < subject.size()) next.push_back({pc.off + gap, subject.size() - gap});
    }
    pieces.swap(next);
  }
  words.reserve(words.size() + pieces.size());
  for (const Piece& pc : pieces) words.push_back(text.substr(pc.off, pc.len));
}

}  // namespace triad::tok

// Tokenizer: construction from GGUF, encode (special split + SPM/BPE/WordPiece), token pieces
// and decode, as llama.cpp's llama_vocab::impl::tokenize / token_to_piece / detokenize do.
// Thread-safety: the Impl is immutable after from_gguf(); every call keeps its state local.
#include "tokenizer/tokenizer.h"

#include "base/error.h"
#include "tokenizer/algorithms.h"
#include "tokenizer/special_split.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab.h"

namespace triad {

struct Tokenizer::Impl {
  tok::Vocab v;
  tok::SpecialMatcher matcher;

  void check_id(int32_t id) const {
    TRIAD_CHECK(id >= 0 && id < v.n_tokens(), "token id ", id, " is outside the vocabulary of ", v.n_tokens(),
                " tokens");
  }
};

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The byte of a "<0xNN>" token, or -1 when the text has another shape.
int byte_of(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// llama.cpp's clean_up_tokenization_spaces: " ?" " !" " ." " ," lose the space, " ' " becomes
// "'", and " 's" " 'm" " 're" " 've" lose the space.
void clean_spaces(std::string& t) {
  if (t.size() < 2) return;
  std::string a(1, t[0]);
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
    a.push_back(x);
  }
  std::string b(1, a[0]);
  for (size_t i = 1; i < a.size(); ++i) {
    const char x = a[i];
    if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {
      b.pop_back();
      a[++i] = '\0';  // the following space is skipped (and no longer counts as a space)
    }
    b.push_back(x);
  }
  std::string c(1, b[0]);
  for (size_t i = 1; i < b.size(); ++i) {
    const char x = b[i];
    if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
      const char x1 = b[i + 1];
      if (x1 == 's' || x1 == 'm') {
        c.pop_back();
      } else if (x1 != 't' && x1 != 'd' && i + 2 < b.size()) {
        const char x2 = b[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) c.pop_back();
      }
    }
    c.push_back(x);
  }
  t.swap(c);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& f) {
  auto impl = std::make_unique<Impl>();
  tok::load_vocab(f, impl->v);
  impl->matcher.build(impl->v);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const tok::Vocab& v = impl_->v;
  const std::vector<tok::Fragment> frags = impl_->matcher.split(v, text, parse_special);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  switch (v.type) {
    case tok::VocabType::kSpm: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      bool prev_special = true;  // a space prefix goes before the first text and after specials
      std::string s;
      for (const tok::Fragment& fr : frags) {
        if (fr.token >= 0) {
          out.push_back(fr.token);
          prev_special = true;
          continue;
        }
        s.clear();
        if (v.add_space_prefix && prev_special) s.push_back(' ');
        s.append(text.substr(fr.off, fr.len));
        replace_all(s, " ", tok::kSpaceMark);
        tok::spm_tokenize(v, s, out);
        prev_special = false;
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case tok::VocabType::kBpe: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      for (const tok::Fragment& fr : frags) {
        if (fr.token >= 0) {
          out.push_back(fr.token);
          continue;
        }
        std::string s = tok::sanitize_utf8(text.substr(fr.off, fr.len));
        if (v.escape_whitespaces) replace_all(s, " ", tok::kSpaceMark);
        tok::bpe_tokenize(v, s, out);
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case tok::VocabType::kUgm: {
      if (add_special && v.add_bos) out.push_back(v.bos);
      for (const tok::Fragment& fr : frags) {
        if (fr.token >= 0) {
          out.push_back(fr.token);
        } else {
          tok::ugm_tokenize(v, text.substr(fr.off, fr.len), out);
        }
      }
      if (add_special && v.add_eos) out.push_back(v.eos);
      break;
    }
    case tok::VocabType::kWpm: {
      if (add_special && v.bos >= 0) out.push_back(v.bos);  // [CLS]
      for (const tok::Fragment& fr : frags) {
        if (fr.token >= 0) {
          out.push_back(fr.token);
        } else {
          tok::wpm_tokenize(v, text.substr(fr.off, fr.len), out);
        }
      }
      if (add_special && v.add_sep && v.sep >= 0) out.push_back(v.sep);  // [SEP]
      break;
    }
  }
  return out;
}

std::string Tokenizer::token_piece(int32_t id, bool render_special) const {
  impl_->check_id(id);
  const tok::Vocab& v = impl_->v;
  const uint16_t a = v.attr[id];
  const std::string& t = v.text[id];
  if (!render_special && (a & (tok::kAttrUnknown | tok::kAttrControl))) return {};
  if (a & (tok::kAttrUnknown | tok::kAttrControl | tok::kAttrUserDefined)) return t;
  if (a & tok::kAttrNormal) {
    std::string s = t;
    if (v.type != tok::VocabType::kBpe || v.escape_whitespaces) {
      replace_all(s, tok::kSpaceMark, " ");
      return s;
    }
    std::string bytes;  // byte-level BPE: map each codepoint back to its byte
    bytes.reserve(s.size());
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t start = pos;
      const int b = tok::cp_to_byte(tok::utf8_decode(s, pos));
      if (b >= 0) {
        bytes.push_back(static_cast<char>(b));
      } else {
        bytes.append(s, start, pos - start);  // not a mapped byte: keep the character
      }
    }
    return bytes;
  }
  if (a & tok::kAttrByte) {
    const int b = byte_of(t);
    return b >= 0 ? std::string(1, static_cast<char>(b)) : t;
  }
  return {};  // unused / undefined tokens render as nothing
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  const tok::Vocab& v = impl_->v;
  std::string out;
  bool remove_space = v.add_space_prefix;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string p = token_piece(ids[i], render_special);
    if (remove_space) {
      if (i == 0 && ids[0] == v.bos && p.empty()) continue;  // the space goes with the next token
      if (!p.empty() && p[0] == ' ') p.erase(0, 1);
      remove_space = false;
    }
    out += p;
  }
  if (v.clean_spaces) clean_spaces(out);
  return out;
}

int32_t Tokenizer::n_vocab() const { return impl_->v.n_tokens(); }
int32_t Tokenizer::bos_id() const { return impl_->v.bos; }
int32_t Tokenizer::eos_id() const { return impl_->v.eos; }
int32_t Tokenizer::eot_id() const { return impl_->v.eot; }
bool Tokenizer::is_end_of_generation(int32_t id) const { return impl_->v.is_eog(id); }

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = impl_->v.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.text[id];
}

TokenAttr Tokenizer::token_attr(int32_t id) const {
  impl_->check_id(id);
  return impl_->v.public_attr[id];
}

std::string_view Tokenizer::model_type() const { return impl_->v.model; }
std::string_view Tokenizer::pre_type() const { return impl_->v.pre; }
bool Tokenizer::add_bos() const { return impl_->v.add_bos; }
bool Tokenizer::add_eos() const { return impl_->v.add_eos; }

}  // namespace triad

// Python str semantics the template engine needs (see pystring.h).
#include "template/pystring.h"

#include <algorithm>
#include <cctype>

namespace triad::tmpl {

bool is_py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

int64_t int_arg(const Value& v, const char* what) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool();
  template_fail(what, " must be an integer, not ", v.type_name());
}

std::string str_arg(const Value& v, const char* what) {
  if (!v.is_string()) template_fail(what, " must be a string, not ", v.type_name());
  return v.as_string();
}

std::vector<std::string> py_split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep.is_none() || sep.is_undefined()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_py_space(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
        out.push_back(s.substr(i, e - i));
        return out;
      }
      size_t j = i;
      while (j < s.size() && !is_py_space(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
    }
    return out;
  }
  const std::string d = str_arg(sep, "split separator");
  if (d.empty()) template_fail("split: empty separator");
  size_t i = 0;
  for (;;) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t j = s.find(d, i);
    if (j == std::string::npos) break;
    out.push_back(s.substr(i, j - i));
    i = j + d.size();
  }
  out.push_back(s.substr(i));
  return out;
}

std::vector<std::string> py_rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, -1);
  if (sep.is_none() || sep.is_undefined()) {
    std::vector<std::string> parts = py_split(s, sep, -1);
    if (static_cast<int64_t>(parts.size()) <= maxsplit + 1) return parts;
    // Re-join the leading parts: find where the last maxsplit words start.
    size_t e = s.size();
    std::vector<std::string> tail;
    for (int64_t k = 0; k < maxsplit; ++k) {
      while (e > 0 && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
      size_t b = e;
      while (b > 0 && !is_py_space(static_cast<unsigned char>(s[b - 1]))) --b;
      tail.insert(tail.begin(), s.substr(b, e - b));
      e = b;
    }
    size_t b = 0;
    while (b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
    tail.insert(tail.begin(), s.substr(b, e - b));
    return tail;
  }
  const std::string d = str_arg(sep, "rsplit separator");
  if (d.empty()) template_fail("rsplit: empty separator");
  std::vector<std::string> out;
  size_t end = s.size();
  for (int64_t k = 0; k < maxsplit; ++k) {
    if (end < d.size()) break;
    const size_t j = s.rfind(d, end - d.size());
    if (j == std::string::npos) break;
    out.insert(out.begin(), s.substr(j + d.size(), end - j - d.size()));
    end = j;
  }
  out.insert(out.begin(), s.substr(0, end));
  return out;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                       size_t limit) {
  std::string out;
  size_t i = 0;
  int64_t n = 0;
  if (from.empty()) {
    for (size_t k = 0; k <= s.size(); ++k) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (k < s.size()) out += s[k];
      if (out.size() > limit) template_fail("replace: result too large");
    }
    return out;
  }
  for (;;) {
    const size_t j = (count >= 0 && n >= count) ? std::string::npos : s.find(from, i);
    if (j == std::string::npos) {
      out += s.substr(i);
      return out;
    }
    out += s.substr(i, j - i);
    out += to;
    if (out.size() > limit) template_fail("replace: result too large");
    i = j + from.size();
    ++n;
  }
}

std::string ascii_map(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string py_capitalize(const std::string& s) {
  std::string out = ascii_map(s, [](int c) { return std::tolower(c); });
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(prev_cased ? std::tolower(u) : std::toupper(u));
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (chars.is_none() || chars.is_undefined()) {
    if (left)
      while (b < e && is_py_space(static_cast<unsigned char>(s[b]))) ++b;
    if (right)
      while (e > b && is_py_space(static_cast<unsigned char>(s[e - 1]))) --e;
  } else {
    const std::string set = str_arg(chars, "strip characters");
    if (left)
      while (b < e && set.find(s[b]) != std::string::npos) ++b;
    if (right)
      while (e > b && set.find(s[e - 1]) != std::string::npos) --e;
  }
  return s.substr(b, e - b);
}

}  // namespace triad::tmpl

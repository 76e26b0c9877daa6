// Numbers as digit grammars (digit_ranges.h).
#include "grammar/digit_ranges.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

namespace triad::grammar::digits {
namespace {

// A GBNF literal of digits (no character needs escaping).
std::string lit(const std::string& s) { return "\"" + s + "\""; }

}  // namespace

std::string alternation(const std::vector<std::string>& alts) {
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string o = "(";
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o + ")";
}

namespace {

// ---- Integer ranges as digit grammars


std::string same_len(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 1) return a == b ? lit(a) : "[" + a + "-" + b + "]";
  if (a[0] == b[0]) return lit(a.substr(0, 1)) + " " + same_len(a.substr(1), b.substr(1));
  const std::string zeros(n - 1, '0'), nines(n - 1, '9');
  std::vector<std::string> alts;
  // a[0] followed by [a[1..], 99..]
  if (a.substr(1) == zeros && b.substr(1) == nines)
    return "[" + a.substr(0, 1) + "-" + b.substr(0, 1) + "] [0-9]{" + std::to_string(n - 1) + "}";
  alts.push_back(lit(a.substr(0, 1)) + " " + same_len(a.substr(1), nines));
  if (b[0] - a[0] > 1) {
    const char lo = static_cast<char>(a[0] + 1), hi = static_cast<char>(b[0] - 1);
    alts.push_back((lo == hi ? lit(std::string(1, lo)) : "[" + std::string(1, lo) + "-" + std::string(1, hi) + "]") +
                   " [0-9]{" + std::to_string(n - 1) + "}");
  }
  alts.push_back(lit(b.substr(0, 1)) + " " + same_len(zeros, b.substr(1)));
  std::string o = "(";
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o + ")";
}

// Non-negative integers in [lo, hi], without leading zeros.
std::string nonneg_range(uint64_t lo, uint64_t hi) {
  std::vector<std::string> alts;
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  for (size_t len = a.size(); len <= b.size(); ++len) {
    std::string x = len == a.size() ? a : std::string(len - 1, '0');
    if (len != a.size()) x.insert(x.begin(), '1');
    std::string y = len == b.size() ? b : std::string(len, '9');
    alts.push_back(same_len(x, y));
  }
  std::string o = "(";
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o + ")";
}


// ---- Decimal ranges as digit grammars
//
// A bound is a double; what validators compare is the number a document's text parses to. With
// at most 15 significant digits a decimal parses to a distinct double (DBL_DIG), and rounding is
// monotonic, so such a decimal d is >= a bound b exactly when d >= S, the shortest decimal that
// reads back as b (and > exactly when d > S). So the grammar admits plain decimals (no exponent)
// of at most 15 digits, compared digit by digit with S: exact on what it admits, and everything
// it admits validates, as Python (float() and int) and JavaScript read it.


// Builds the grammar of magnitudes m with lo <= m (or <) and m <= hi (or <; no hi: unbounded),
// written without sign or exponent and with at most 15 digits in all. `rule` names a body.
class DecimalRange {
 public:
  DecimalRange(const DecBound& lo, const std::optional<DecBound>& hi, const RuleFn& rule)
      : lo_(lo), has_hi_(hi.has_value()), rule_(rule) {
    if (hi) hi_ = *hi;
    if (has_hi_ && hi_.v.ip.size() > kDigits) has_hi_ = false;  // beyond every admitted number
  }

  // The expression; empty when no admitted number lies in the range.
  std::string build() {
    const size_t L = lo_.v.ip.size(), H = has_hi_ ? hi_.v.ip.size() : kDigits;
    std::vector<std::string> alts;
    for (size_t n = L; n <= std::min(H, kDigits); ++n) {
      std::string e = int_state(n, 0, n == L, has_hi_ && n == H);
      if (!e.empty()) alts.push_back(e);
    }
    return alternation(alts);
  }

 private:
  static constexpr size_t kDigits = 15;

  static std::string digit_class(char a, char b) {
    // Filled in place (GCC 12 reports a false -Wrestrict on the concatenation here).
    std::string o = a == b ? "\"0\"" : "[0-9]";
    o[1] = a;
    if (a != b) o[3] = b;
    return o;
  }

  static char at(const std::string& s, size_t i) { return i < s.size() ? s[i] : '0'; }

  // The digit choices at one position: [lo_d, hi_d], where the bound digit keeps its side tight.
  // Calls next(class, tight_lo, tight_hi) for each group; returns their alternatives.
  template <class Next>
  static std::string branch(char lo_d, char hi_d, bool tl, bool th, Next next) {
    if (lo_d > hi_d) return "";
    std::vector<std::string> alts;
    auto add = [&](char a, char b, bool l, bool h) {
      if (a > b) return;
      std::string rest = next(l, h);
      if (rest == "!") return;  // no way to finish
      alts.push_back(digit_class(a, b) + (rest.empty() ? "" : " " + rest));
    };
    if (tl && th && lo_d == hi_d) {
      add(lo_d, lo_d, true, true);
    } else {
      if (tl) add(lo_d, lo_d, true, false);
      add(static_cast<char>(lo_d + (tl ? 1 : 0)), static_cast<char>(hi_d - (th ? 1 : 0)), false, false);
      if (th) add(hi_d, hi_d, false, true);
    }
    if (alts.empty()) return "!";
    return alts.size() == 1 ? alts[0] : alternation(alts);
  }

  // After i of n integer digits, tight against the low / high bound's digits.
  std::string int_state(size_t n, size_t i, bool tl, bool th) {
    if (i == n) return end_int(n, tl, th);
    const char lo_d = tl ? lo_.v.ip[i] : (i == 0 && n > 1 ? '1' : '0');
    const char hi_d = th ? hi_.v.ip[i] : '9';
    std::string e = branch(lo_d, hi_d, tl, th, [&](bool l, bool h) {
      if (!l && !h) {  // free: the remaining digits are any
        const std::string end = end_int(n, false, false);
        const size_t left = n - i - 1;
        std::string d = left ? "[0-9]{" + std::to_string(left) + "}" : "";
        return d.empty() ? end : (end.empty() ? d : d + " " + end);
      }
      const std::string r = int_state(n, i + 1, l, h);
      return r;
    });
    if (e == "!") return i == 0 ? "" : "!";
    return i == 0 ? e : rule_("dec", e);
  }

  // Whether the number may end here: its digits so far equal the tight bounds' prefixes.
  bool may_end(bool tl, bool th, size_t frac_len) const {
    if (tl) {
      if (lo_.v.fp.size() > frac_len) return false;  // still below lo
      if (!lo_.inclusive) return false;               // equal to lo
    }
    if (th && hi_.v.fp.size() <= frac_len && !hi_.inclusive) return false;  // equal to hi
    return true;
  }

  std::string end_int(size_t n, bool tl, bool th) {
    const size_t budget = kDigits - n;
    std::vector<std::string> alts;
    if (may_end(tl, th, 0)) alts.push_back("\"\"");
    if (budget > 0) {
      std::string f = frac_state(0, budget, tl, th);
      if (f != "!" && !f.empty()) alts.push_back("\".\" " + f);
    }
    if (alts.empty()) return "!";
    if (alts.size() == 1 && alts[0] == "\"\"") return "";
    return rule_("dec", alternation(alts));
  }

  // At least one more fraction digit (j written so far, at most `budget` in all).
  std::string frac_state(size_t j, size_t budget, bool tl, bool th) {
    if (!tl && !th) return "[0-9]{1," + std::to_string(budget - j) + "}";
    const char lo_d = tl ? at(lo_.v.fp, j) : '0';
    const char hi_d = th ? at(hi_.v.fp, j) : '9';
    std::string e = branch(lo_d, hi_d, tl, th, [&](bool l, bool h) -> std::string {
      const bool end = may_end(l, h, j + 1);
      const bool more = j + 1 < budget;
      if (!l && !h) return more ? "[0-9]{0," + std::to_string(budget - j - 1) + "}" : std::string();
      std::string next = more ? frac_state(j + 1, budget, l, h) : "!";
      if (next == "!") return end ? "" : "!";
      return end ? "(" + next + ")?" : next;
    });
    if (e == "!") return "!";
    return rule_("frac", e);
  }

  DecBound lo_;
  bool has_hi_;
  DecBound hi_;
  const RuleFn& rule_;
};




}  // namespace

Dec dec_of(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  const std::string t(buf, r.ptr);
  const size_t e = t.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (t[i] != '.') digits += t[i];
  const int exp = std::stoi(t.substr(e + 1));
  const long point = 1L + exp;  // digits before the decimal point
  Dec d;
  if (point <= 0) {
    d.fp = std::string(static_cast<size_t>(-point), '0') + digits;
  } else if (static_cast<size_t>(point) >= digits.size()) {
    d.ip = digits + std::string(static_cast<size_t>(point) - digits.size(), '0');
  } else {
    d.ip = digits.substr(0, static_cast<size_t>(point));
    d.fp = digits.substr(static_cast<size_t>(point));
  }
  while (d.ip.size() > 1 && d.ip[0] == '0') d.ip.erase(0, 1);
  while (!d.fp.empty() && d.fp.back() == '0') d.fp.pop_back();
  if (d.ip.empty()) d.ip = "0";
  return d;
}

std::string int_range(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) {  // negatives: "-" then |x| in [max(1, -hi), -lo]
    const uint64_t nlo = static_cast<uint64_t>(hi < 0 ? -hi : 1), nhi = static_cast<uint64_t>(-lo);
    alts.push_back("\"-\" " + nonneg_range(nlo, nhi));
  }
  if (hi >= 0) alts.push_back(nonneg_range(static_cast<uint64_t>(std::max<int64_t>(lo, 0)), static_cast<uint64_t>(hi)));
  std::string o = "(";
  for (size_t i = 0; i < alts.size(); ++i) o += (i ? " | " : "") + alts[i];
  return o + ")";
}

std::string decimal_range(const DecBound& lo, const std::optional<DecBound>& hi, const RuleFn& add_rule) {
  return DecimalRange(lo, hi, add_rule).build();
}

// Non-negative integers in [lo, hi] divisible by k: digit states (position, tight against
// lo's / hi's digits, remainder so far), the free ones shared by remaining length.
std::string mod_range(uint64_t lo, uint64_t hi, int k, const RuleFn& add_rule) {
  const std::string A = std::to_string(lo), B = std::to_string(hi);
  std::map<std::tuple<size_t, size_t, bool, bool, int>, std::string> memo;
  std::function<std::string(size_t, size_t, bool, bool, int)> state = [&](size_t n, size_t i, bool tl, bool th,
                                                                             int r) -> std::string {
    if (i == n) return r == 0 ? "" : "!";
    const bool free = !tl && !th && i > 0;
    const auto key = std::make_tuple(free ? 0 : n, n - i, tl, th, r);
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const char lo_d = tl ? A[i] : (i == 0 && n > 1 ? '1' : '0');
    const char hi_d = th ? B[i] : '9';
    std::map<std::string, std::string> by_next;  // next state -> its digits
    std::vector<std::string> order;
    for (char d = lo_d; d <= hi_d; ++d) {
      const std::string next = state(n, i + 1, tl && d == lo_d, th && d == hi_d, (r * 10 + (d - '0')) % k);
      if (next == "!") continue;
      if (!by_next.count(next)) order.push_back(next);
      by_next[next] += d;
    }
    std::string body;
    for (const std::string& next : order) {
      const std::string& ds = by_next[next];
      const std::string cls = ds.size() == 1 ? "\"" + ds + "\"" : "[" + ds + "]";
      body += (body.empty() ? "" : " | ") + cls + (next.empty() ? "" : " " + next);
    }
    const std::string out = body.empty() ? "!" : add_rule("mod", body);
    memo[key] = out;
    return out;
  };
  std::vector<std::string> alts;
  for (size_t n = A.size(); n <= B.size(); ++n) {
    const std::string e = state(n, 0, n == A.size(), n == B.size(), 0);
    if (e != "!") alts.push_back(e);
  }
  return alternation(alts);
}


}  // namespace triad::grammar::digits

// Errors and checks.
//
// Triad reports failures on untrusted input (files, requests, command lines) by throwing
// triad::Error with a message that names what is wrong. TRIAD_CHECK is a real check that stays
// in release builds: use it for anything derived from input, never assert().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace triad {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// Throws triad::Error whose message is the concatenation of the arguments.
template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(detail::concat(std::forward<Args>(args)...));
}

}  // namespace triad

#define TRIAD_CHECK(cond, ...)                       \
  do {                                               \
    if (!(cond)) [[unlikely]] ::triad::fail(__VA_ARGS__); \
  } while (0)

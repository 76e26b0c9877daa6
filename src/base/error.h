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

// Throws triad::Error(message). Not inline: code compiled with ISA flags the CPU may lack calls
// this (through kernels/isa_error.h) so that it instantiates none of the templates above.
[[noreturn]] void fail_message(const char* message);

}  // namespace triad

#define TRIAD_CHECK(cond, ...)                       \
  do {                                               \
    if (!(cond)) [[unlikely]] ::triad::fail(__VA_ARGS__); \
  } while (0)

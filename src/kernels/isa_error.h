// Error path for the ISA translation units (*_avx2.cpp, *_avx512.cpp).
//
// Those files are compiled with ISA flags that the running CPU may lack. Every inline function or
// template they instantiate (triad::fail, Error's destructor, std::string's members) is emitted as
// a weak, link-once symbol, and the linker keeps one copy of each for the whole program: possibly
// the copy compiled with AVX-512 flags, which baseline code would then call on a CPU without
// AVX-512. So those files report errors only through isa_fail() below: internal linkage, printf
// formatting into a stack buffer, and the throw happens in fail_message() (base/error.cpp,
// compiled for baseline x86-64). tests/kernels/isa_objects_test.py checks that no ISA object
// defines weak code.
//
// Thread-safety: isa_fail is reentrant (no shared state).
#pragma once

#include <cstdarg>
#include <cstdio>

#include "base/error.h"

namespace triad::kernels {
namespace {

[[noreturn, gnu::format(printf, 1, 2), gnu::cold]] inline void isa_fail(const char* fmt, ...) {
  char message[256];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof message, fmt, args);
  va_end(args);
  fail_message(message);
}

}  // namespace
}  // namespace triad::kernels

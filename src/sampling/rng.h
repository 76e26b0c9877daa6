// Seeded random number generator for sampling, identical on every standard library.
//
// The engine is std::mt19937_64, whose seeding and output sequence the C++ standard specifies
// exactly ([rand.predef]: the 10000th output of a default-constructed engine is
// 9981545732273789042). The standard distributions (std::uniform_real_distribution, ...) are
// NOT specified bit-for-bit, so the uniform draw is done here: uniform01() takes the top 53
// bits of one 64-bit output and scales them by 2^-53, giving a double in [0, 1) on a grid of
// 2^-53 with every grid point equally likely. Same seed -> same sequence, on any platform.
// Not thread-safe: one generator per sequence, driven by one thread.
#pragma once

#include <cstdint>
#include <random>

namespace triad {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  void reseed(uint64_t seed) { engine_.seed(seed); }
  // One raw 64-bit output of mt19937_64.
  uint64_t next_u64() { return engine_(); }
  // Uniform double in [0, 1) from exactly one 64-bit output.
  double uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // A fresh seed from std::random_device (for runs that did not ask for reproducibility).
  static uint64_t random_seed() {
    std::random_device rd;
    const uint64_t hi = rd();
    const uint64_t lo = rd();
    return (hi << 32) ^ lo;
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace triad

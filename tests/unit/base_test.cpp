// Tests of src/base and src/tensor: thread pool coverage and reuse, checked arithmetic, fp16 and
// bf16 conversions (exhaustive over all 16-bit patterns), FP8 E4M3/E5M2 conversions (exhaustive
// over all codes and their midpoints), dtype traits.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/checked_math.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/fair_share.h"
#include "base/thread_pool.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"
#include "tensor/fp8.h"

namespace triad {
namespace {

TEST(ThreadPool, EveryIndexOnceAcrossManyJobs) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

TEST(ThreadPool, RunGivesDistinctThreadIds) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.run([&](int tid, int nth) {
    EXPECT_EQ(nth, 4);
    seen[tid].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

TEST(ThreadPool, SurvivesIdleSleep) {
  // Workers go to sleep after spinning; a job after a pause must still run everywhere.
  ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.run([&](int, int) { count++; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  pool.run([&](int, int) { count++; });
  EXPECT_EQ(count.load(), 4);
}

TEST(ThreadPool, ChunksEachOnceWithValidThreadIds) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    // Includes more chunks than one job holds (claimed in groups).
    for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{4096}, ThreadPool::kMaxChunks, ThreadPool::kMaxChunks + 1,
                      int64_t{200000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_tid{0};
      pool.for_each_chunk(n, [&](int64_t c, int tid) {
        if (tid < 0 || tid >= threads) bad_tid++;
        hits[static_cast<size_t>(c)].fetch_add(1);
      });
      EXPECT_EQ(bad_tid.load(), 0);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
    }
  }
}

TEST(ThreadPool, ParallelForBoundariesDependOnSizesOnly) {
  // The chunk boundaries are a function of n and the pool size, not of which thread ran what:
  // collected over many jobs they are always the same set.
  ThreadPool pool(3);
  for (int64_t n : {1, 7, 12, 13, 1000}) {
    std::vector<std::pair<int64_t, int64_t>> first;
    for (int rep = 0; rep < 20; ++rep) {
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> got;
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        std::lock_guard<std::mutex> l(mu);
        got.emplace_back(b, e);
      });
      std::sort(got.begin(), got.end());
      ASSERT_EQ(static_cast<int64_t>(got.size()), pool.chunks_for(n));
      ASSERT_EQ(got.front().first, 0);
      ASSERT_EQ(got.back().second, n);
      for (size_t i = 1; i < got.size(); ++i) ASSERT_EQ(got[i - 1].second, got[i].first);
      if (rep == 0) first = got;
      ASSERT_EQ(got, first);
    }
  }
}

TEST(ThreadPool, RunningThreadsTakeAStalledThreadsShare) {
  // Whoever claims chunk 0 is held there (as if the OS had descheduled it) until every other
  // chunk is done. With work assigned per thread, its other chunks would wait for it and this
  // would time out; claimed work lets the running threads finish them.
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 20; ++rep) {
      constexpr int64_t kN = 64;
      std::atomic<int> others{0};
      std::atomic<bool> timed_out{false};
      pool.for_each_chunk(kN, [&](int64_t c, int) {
        if (c != 0) {
          others++;
          return;
        }
        const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (others.load() != kN - 1) {
          if (std::chrono::steady_clock::now() > limit) {
            timed_out = true;
            return;
          }
          std::this_thread::yield();
        }
      });
      ASSERT_FALSE(timed_out.load()) << "threads " << threads;
      ASSERT_EQ(others.load(), kN - 1);
    }
  }
}

TEST(ThreadPool, ManySubmittersShareOnePool) {
  // Engines of several models submit to one pool: every job runs whole, each submitter sees its
  // own results, and run() still reaches every thread.
  ThreadPool pool(2);
  std::vector<std::thread> subs;
  std::atomic<int> failures{0};
  for (int s = 0; s < 3; ++s) {
    subs.emplace_back([&, s] {
      for (int rep = 0; rep < 300; ++rep) {
        const int64_t n = 1 + (rep * 7 + s) % 50;
        std::vector<int64_t> out(static_cast<size_t>(n), -1);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) out[static_cast<size_t>(i)] = i * (s + 1);
        });
        for (int64_t i = 0; i < n; ++i)
          if (out[static_cast<size_t>(i)] != i * (s + 1)) failures++;
        std::atomic<int> ran{0};
        pool.run([&](int, int) { ran++; });
        if (ran.load() != 2) failures++;
        if (rep % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers sleep
      }
    });
  }
  for (auto& t : subs) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(ThreadPool, ALeaseHoldsThePoolForItsThread) {
  // Two engines sharing a pool each lease it for a step of several jobs: the steps never
  // interleave, and the holder's own jobs run inside its lease.
  ThreadPool pool(2);
  std::atomic<int> inside{0}, overlaps{0}, jobs{0};
  auto engine = [&] {
    for (int step = 0; step < 200; ++step) {
      const ThreadPool::Lease lease(pool);
      if (inside.fetch_add(1) != 0) overlaps++;
      for (int op = 0; op < 5; ++op) pool.parallel_for(16, [&](int64_t, int64_t) { jobs++; });
      inside.fetch_sub(1);
    }
  };
  std::thread a(engine), b(engine);
  // A third thread's single jobs wait their turn too.
  std::thread c([&] {
    for (int i = 0; i < 200; ++i)
      pool.parallel_for(4, [&](int64_t, int64_t) {
        if (inside.load() != 0) overlaps++;
      });
  });
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(jobs.load(), 2 * 200 * 5 * static_cast<int>(pool.chunks_for(16)));
  const ThreadPool::Lease lease(pool);
  EXPECT_THROW(ThreadPool::Lease again(pool), Error);
}

// Simulates two submitters that always want the pool (as the pool arbitrates: the releaser
// keeps its turn when it has held the pool least) and returns each one's share of the time.
static std::pair<double, double> simulate_shares(double hold_a, double hold_b, double seconds) {
  FairShare fs;
  std::thread::id ids[2];
  std::thread ta([] {}), tb([] {});
  ids[0] = ta.get_id();
  ids[1] = tb.get_id();
  ta.join();
  tb.join();
  const double hold[2] = {hold_a, hold_b};
  double held[2] = {0, 0}, t = 0;
  fs.arrive(ids[0]);
  fs.serve(ids[0]);
  int cur = 0;
  fs.arrive(ids[1]);
  while (t < seconds) {
    fs.charge(ids[cur], hold[cur]);
    held[cur] += hold[cur];
    t += hold[cur];
    const int other = 1 - cur;
    if (fs.clock(ids[cur]) >= fs.clock(ids[other])) cur = other;
    fs.arrive(ids[cur]);
    fs.serve(ids[cur]);
    fs.arrive(ids[1 - cur]);
  }
  return {held[0] / t, held[1] / t};
}

TEST(FairShare, BusySubmittersShareTheTimeEquallyWhateverTheirSteps) {
  // A 15 ms step against a 45 ms step: in turns the short one would get 25% of the time.
  const auto [a, b] = simulate_shares(0.015, 0.045, 30.0);
  EXPECT_NEAR(a, 0.5, 0.02);
  EXPECT_NEAR(b, 0.5, 0.02);
}

TEST(FairShare, NewcomersStartAtTheFloorNotAtZero) {
  FairShare fs(0.05);
  std::vector<std::thread::id> ids;
  std::vector<std::thread> ts;
  for (int i = 0; i < 2; ++i) ts.emplace_back([] {});
  for (auto& t : ts) {
    ids.push_back(t.get_id());
    t.join();
  }
  fs.arrive(ids[0]);
  fs.serve(ids[0]);
  fs.charge(ids[0], 10.0);  // ten seconds alone
  fs.arrive(ids[0]);
  fs.serve(ids[0]);         // the floor is now its clock, about 10 s
  EXPECT_GT(fs.clock(ids[0]), 9.9);
  fs.arrive(ids[1]);        // a newcomer starts 50 ms behind it, not 10 s
  EXPECT_DOUBLE_EQ(fs.clock(ids[1]), fs.clock(ids[0]) - 0.05);
  // It goes first (least clock) only until it has held the pool 50 ms more.
  EXPECT_LT(fs.clock(ids[1]), fs.clock(ids[0]));
  fs.charge(ids[1], 0.06);
  EXPECT_GT(fs.clock(ids[1]), fs.clock(ids[0]));
  // An idle spell is not banked: arriving again does not lower a clock.
  const double before = fs.clock(ids[1]);
  fs.arrive(ids[1]);
  EXPECT_DOUBLE_EQ(fs.clock(ids[1]), before);
}

TEST(FairShare, TheTableStaysSmallWithManySubmitters) {
  FairShare fs(0.05);
  std::thread::id keep;
  for (int i = 0; i < 1000; ++i) {
    std::thread t([] {});
    const std::thread::id id = t.get_id();
    t.join();
    if (i == 0) keep = id;
    fs.arrive(id);
    fs.serve(id);
    fs.charge(id, 0.01);
  }
  EXPECT_LE(fs.size(), FairShare::kPrune + 1);
}

TEST(ThreadPool, TwoLeasingEnginesShareTheTimeNotTheTurns) {
  // Engine A's steps hold the pool 1 ms, B's 3 ms (sleeping inside the lease, so the VM's load
  // matters little). Served in turns, A would hold it a quarter of the time.
  ThreadPool pool(2);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> held_us[2] = {0, 0};
  auto engine = [&](int k, int step_ms) {
    while (!stop.load()) {
      const ThreadPool::Lease lease(pool);
      const auto t0 = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      held_us[k] += std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    }
  };
  std::thread a(engine, 0, 1), b(engine, 1, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  stop = true;
  a.join();
  b.join();
  const double ha = static_cast<double>(held_us[0].load()), hb = static_cast<double>(held_us[1].load());
  EXPECT_GT(ha / (ha + hb), 0.35) << "A held " << ha << " us, B " << hb << " us";
  EXPECT_GT(hb / (ha + hb), 0.35) << "A held " << ha << " us, B " << hb << " us";
}

TEST(ThreadPool, AThrowOnTheSubmittingThreadLeavesThePoolUsable) {
  // fn must not throw on a worker, but the engine catches a failed step on its own thread: the
  // job is closed, the worker's claimed chunks finish, the exception arrives, and the next jobs
  // (from this thread and another) run whole.
  ThreadPool pool(2);
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> worker_chunks{0};
    std::atomic<bool> thrown{false};
    EXPECT_THROW(pool.for_each_chunk(50,
                                     [&](int64_t, int tid) {
                                       if (tid == 0) {
                                         thrown = true;
                                         throw Error("chunk failed");
                                       }
                                       // The worker holds its chunk until the throw, so the
                                       // submitting thread surely claims one.
                                       const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                                       while (!thrown.load() && std::chrono::steady_clock::now() < limit)
                                         std::this_thread::sleep_for(std::chrono::microseconds(100));
                                       // ... and past the submitter's spin, so that it waits
                                       // asleep for this chunk (a wake-up once went missing).
                                       if (rep % 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                       worker_chunks++;
                                     }),
                 Error);
    EXPECT_LT(worker_chunks.load(), 50);
    EXPECT_THROW(pool.run([&](int tid, int) {
                   if (tid == 0) throw Error("run failed");
                 }),
                 Error);
    std::atomic<int> hits{0};
    std::thread other([&] { pool.parallel_for(100, [&](int64_t b, int64_t e) { hits += static_cast<int>(e - b); }); });
    other.join();
    pool.parallel_for(100, [&](int64_t b, int64_t e) { hits += static_cast<int>(e - b); });
    EXPECT_EQ(hits.load(), 200);
  }
}

TEST(ThreadPool, NestedSubmitIsRefused) {
  ThreadPool pool(1);  // inline: the refusal is an exception on the caller
  EXPECT_THROW(pool.parallel_for(4, [&](int64_t, int64_t) { pool.parallel_for(2, [](int64_t, int64_t) {}); }), Error);
  ThreadPool other(1);
  int n = 0;
  pool.parallel_for(2, [&](int64_t b, int64_t e) { other.parallel_for(e - b, [&](int64_t x, int64_t y) { n += static_cast<int>(y - x); }); });
  EXPECT_EQ(n, 2);
}

TEST(CheckedMath, Overflow) {
  EXPECT_EQ(checked_add(1, 2), 3u);
  EXPECT_FALSE(checked_add(std::numeric_limits<uint64_t>::max(), 1));
  EXPECT_EQ(checked_mul(1ull << 31, 1ull << 31), 1ull << 62);
  EXPECT_FALSE(checked_mul(1ull << 32, 1ull << 32));
}

TEST(Fp16, ExhaustiveRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = fp16_to_f32(static_cast<uint16_t>(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
    if (nan) {
      EXPECT_TRUE(std::isnan(f));
      continue;
    }
    ASSERT_EQ(f32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(fp16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_f32(0x7c00)));
}

TEST(Fp16, RoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between 1 and the next half (1 + 2^-10): ties go to even (1).
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies between 1+2^-10 (odd mantissa) and 1+2^-9: rounds up to even.
  EXPECT_EQ(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_fp16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half of the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
}

TEST(Bf16, Conversions) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), b);
  }
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, Traits) {
  EXPECT_EQ(traits(DType::kQ4_K).block_size, 256u);
  EXPECT_EQ(traits(DType::kQ4_K).block_bytes, 144u);
  EXPECT_EQ(traits(DType::kQ8_0).block_bytes, 34u);
  EXPECT_EQ(row_bytes(DType::kQ6_K, 512), 420u);
  EXPECT_EQ(row_bytes(DType::kBF16, 3), 6u);
  EXPECT_FALSE(dtype_traits(4).has_value());  // removed Q4_2
  EXPECT_FALSE(dtype_traits(1000).has_value());
  EXPECT_TRUE(dtype_supported_for_weights(DType::kQ5_1));
  EXPECT_TRUE(dtype_supported_for_weights(DType::kQ2_K));
  EXPECT_FALSE(dtype_supported_for_weights(DType::kQ8_K));
  // Internal types are not GGUF types, and the row-scaled ones are matmul-only.
  EXPECT_FALSE(dtype_traits(static_cast<uint32_t>(DType::kF8_E4M3)).has_value());
  EXPECT_EQ(traits(DType::kF8_E5M2).block_bytes, 1u);
  EXPECT_FALSE(dtype_supported_for_weights(DType::kF8_E4M3));
  EXPECT_TRUE(dtype_supported_for_matmul(DType::kF8_E4M3));
  EXPECT_TRUE(dtype_has_row_scale(DType::kI8));
  EXPECT_FALSE(dtype_has_row_scale(DType::kQ8_0));
}

// Every finite code decodes to a value that encodes back to it; the midpoint between two
// neighbours rounds to the even code; beyond the largest finite value encoding saturates; the
// decoded values are the format's (spot checks against the OCP definition).
template <class Enc, class Dec>
void check_fp8(Enc enc, Dec dec, uint8_t max_code, float max_val, bool e5m2) {
  EXPECT_EQ(dec(max_code), max_val);
  for (int s = 0; s < 2; ++s) {
    const uint8_t sign = static_cast<uint8_t>(s << 7);
    for (uint8_t m = 0; m <= max_code; ++m) {
      const uint8_t code = static_cast<uint8_t>(sign | m);
      const float v = dec(code);
      ASSERT_TRUE(std::isfinite(v)) << int(code);
      if (m == 0) {
        EXPECT_EQ(enc(v), code);  // +-0 keep their sign
        continue;
      }
      EXPECT_EQ(enc(v), code) << int(code);
      if (m < max_code) {
        const float next = dec(static_cast<uint8_t>(code + 1));
        const float mid = (v + next) / 2;  // exact: both have few significant bits
        const uint8_t even = (m & 1) ? static_cast<uint8_t>(code + 1) : code;
        EXPECT_EQ(enc(mid), even) << "midpoint above code " << int(code);
        EXPECT_EQ(enc(std::nextafter(mid, 0.f)), code);
        EXPECT_EQ(enc(std::nextafter(mid, s ? -1e9f : 1e9f)), static_cast<uint8_t>(code + 1));
      }
    }
    EXPECT_EQ(enc(s ? -1e30f : 1e30f), static_cast<uint8_t>(sign | max_code));
    EXPECT_EQ(enc(s ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity()),
              static_cast<uint8_t>(sign | max_code));
  }
  EXPECT_TRUE(std::isnan(dec(enc(std::nanf("")))));
  EXPECT_EQ(enc(1.0f), e5m2 ? 0x3c : 0x38);
  EXPECT_EQ(enc(1e-30f), 0);  // underflow to +0
}

TEST(Fp8, E4M3) {
  check_fp8(f32_to_e4m3, e4m3_to_f32, 0x7e, 448.f, false);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.f, -6));  // smallest normal
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_EQ(f32_to_e4m3(460.f), 0x7e);  // would round to 480 (a NaN code): saturates
}

TEST(Fp8, E5M2) {
  check_fp8(f32_to_e5m2, e5m2_to_f32, 0x7b, 57344.f, true);
  EXPECT_EQ(e5m2_to_f32(0x01), std::ldexp(1.f, -16));
  EXPECT_TRUE(std::isinf(e5m2_to_f32(0x7c)));
}

TEST(Cpu, Avx512LevelNeedsVnniButNotBf16) {
  CpuFeatures f;
  EXPECT_TRUE(features_support(f, IsaLevel::kScalar));
  EXPECT_FALSE(features_support(f, IsaLevel::kAvx2));
  f.avx2 = f.fma = f.f16c = true;  // Haswell .. Zen 3
  EXPECT_TRUE(features_support(f, IsaLevel::kAvx2));
  EXPECT_FALSE(features_support(f, IsaLevel::kAvx512));
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = true;  // Skylake-SP: no VNNI
  EXPECT_FALSE(features_support(f, IsaLevel::kAvx512));
  f.avx512vnni = true;  // Ice Lake, Cascade Lake, VMs that hide BF16: the AVX-512 kernels
  EXPECT_TRUE(features_support(f, IsaLevel::kAvx512));
  f.avx512bf16 = true;  // Zen 4, Sapphire Rapids
  EXPECT_TRUE(features_support(f, IsaLevel::kAvx512));
  f.fma = false;  // every level needs the one below it
  EXPECT_FALSE(features_support(f, IsaLevel::kAvx512));
  // This CPU: the chosen level is one it supports.
  EXPECT_TRUE(cpu_supports(best_isa()));
  EXPECT_NE(cpu_summary(), "?");
}

TEST(Cpu, ReportsALevel) {
  const IsaLevel l = best_isa();
  EXPECT_NE(std::string(isa_name(l)), "?");
  EXPECT_GE(physical_cores(), 1);
}

}  // namespace
}  // namespace triad

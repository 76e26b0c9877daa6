// matmul_bench: speed of kernels::matmul on Qwen2.5-0.5B-shaped matrices (hidden 896, FFN 4864,
// vocab 151936) for every weight type, with 1 and 2 threads.
//
//   n_tokens = 1   (token generation, memory-bound): GB/s of weight bytes read. The weights are
//                  cycled through enough copies to exceed the last-level cache, as in a real
//                  decode step, so this is DRAM streaming bandwidth. Kernel trials alternate with
//                  read-bandwidth probes on the same threads (membw.h); the row shows the best of
//                  each and their ratio.
//   n_tokens = 512 (prompt processing, compute-bound): GFLOP/s, counting 2 * rows * cols *
//                  n_tokens; compare with the measured per-core instruction peaks.
// Every figure is the best of several timed trials (the dev machine is shared).
//
// Types: every GGUF weight type, and the online row-scaled fp8_e4m3 / int8 (W8A8).
// --resident 1: n=1 reads one copy of the weights again and again, so a matrix that fits the
// caches measures the kernel's compute-bound rate (where a kernel stops being memory-bound).
// --layout gguf,lanes,panels: the quantized types that have a lane layout (kernels/lane_layout.h)
// or a panel layout (kernels/panel_layout.h; what a model loads into on AVX-512) are measured in
// each listed layout that they have; "~L" marks the lane rows, "~P" the panels.
// --batch N: the token count of the compute-bound column (default 512; 16 is a 16-way decode).
//   It reads one copy of the weights (cache-resident where they fit) unless --stream-batch 1,
//   which cycles the copies as n=1 does: a batched decode step streams its weights from DRAM,
//   so that row shows how well a kernel overlaps memory with arithmetic.
// usage: matmul_bench [--types f16,q8_0,...] [--shapes 896x896,...] [--threads 1,2]
//                     [--tokens 1,512] [--isa scalar|avx2|avx512] [--min-time SECONDS]
//                     [--resident 0|1] [--layout gguf,lanes,panels] [--batch N]
//                     [--stream-batch 0|1]
// Thread-safety: single-threaded driver; the kernels run on a ThreadPool.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/cpu_features.h"
#include "base/thread_pool.h"
#include "base/timer.h"
#include "kernels/lane_layout.h"
#include "kernels/panel_layout.h"
#include "kernels/matmul.h"
#include "kernels/matmul_impl.h"
#include "kernels/membw.h"
#include "peak.h"
#include "tensor/dtype.h"
#include "tensor/fp16.h"

namespace {

using triad::DType;

struct Shape {
  int64_t rows, cols;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    if (e > b) out.push_back(s.substr(b, e - b));
    b = e + 1;
  }
  return out;
}

DType parse_type(const std::string& s) {
  static const std::pair<const char*, DType> kNames[] = {
      {"f32", DType::kF32},   {"f16", DType::kF16},   {"bf16", DType::kBF16},
      {"q8_0", DType::kQ8_0}, {"q4_0", DType::kQ4_0}, {"q4_1", DType::kQ4_1},
      {"q5_0", DType::kQ5_0}, {"q5_1", DType::kQ5_1}, {"q4_k", DType::kQ4_K},
      {"q5_k", DType::kQ5_K}, {"q6_k", DType::kQ6_K}, {"q2_k", DType::kQ2_K},
      {"q3_k", DType::kQ3_K}, {"iq4_nl", DType::kIQ4_NL}, {"iq4_xs", DType::kIQ4_XS},
      {"mxfp4", DType::kMXFP4}, {"fp8_e4m3", DType::kF8_E4M3}, {"int8", DType::kI8}};
  for (const auto& [name, t] : kNames)
    if (s == name) return t;
  std::fprintf(stderr, "unknown type %s\n", s.c_str());
  std::exit(2);
}

// xorshift64*: fast enough to fill hundreds of MB.
struct Rng {
  uint64_t s = 0x9E3779B97F4A7C15ull;
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uniform() { return static_cast<float>(next() >> 40) * (1.0f / 16777216.0f) * 2.f - 1.f; }
};

// Random weights with finite scales (values do not matter for speed, only finiteness).
void fill_weights(DType t, uint8_t* p, uint64_t bytes, Rng& rng) {
  if (t == DType::kF32 || t == DType::kF16 || t == DType::kBF16) {
    const uint64_t esz = t == DType::kF32 ? 4 : 2;
    for (uint64_t i = 0; i < bytes / esz; ++i) {
      const float v = rng.uniform() * 0.05f;
      if (t == DType::kF32) {
        std::memcpy(p + 4 * i, &v, 4);
      } else {
        const uint16_t h = t == DType::kF16 ? triad::f32_to_fp16(v) : triad::f32_to_bf16(v);
        std::memcpy(p + 2 * i, &h, 2);
      }
    }
    return;
  }
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng.next();
    std::memcpy(p + i, &v, 8);
  }
  if (t == DType::kF8_E4M3) {  // no NaN codes
    for (uint64_t i = 0; i < bytes; ++i)
      if ((p[i] & 0x7f) == 0x7f) p[i] ^= 1;
    return;
  }
  if (t == DType::kI8) return;
  std::vector<int> fields;
  switch (t) {
    case DType::kQ4_0: case DType::kQ5_0: case DType::kQ8_0: case DType::kIQ4_NL: case DType::kIQ4_XS:
      fields = {0};
      break;
    case DType::kQ6_K: fields = {208}; break;
    case DType::kQ3_K: fields = {108}; break;
    case DType::kQ2_K: fields = {80, 82}; break;
    case DType::kMXFP4: fields = {}; break;
    default: fields = {0, 2}; break;
  }
  if (t == DType::kMXFP4)  // E8M0 exponent bytes: scales near 2^-7
    for (uint64_t b = 0; b < bytes / 17; ++b) p[b * 17] = 120;
  const uint32_t bb = triad::traits(t).block_bytes;
  for (uint64_t b = 0; b < bytes / bb; ++b)
    for (int f : fields) {
      const uint16_t h = triad::f32_to_fp16(0.01f + 0.01f * rng.uniform());
      std::memcpy(p + b * bb + f, &h, 2);
    }
}

double cpu_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str());
  return 0;
}

// Best seconds per call of fn over `trials` trials of at least min_time each.
template <typename F>
double best_seconds(F&& fn, double min_time, int trials, int min_calls) {
  fn(0);  // warm-up
  double best = 1e30;
  int64_t call = 1;
  for (int tr = 0; tr < trials; ++tr) {
    triad::Timer timer;
    int64_t calls = 0;
    do {
      fn(call++);
      ++calls;
    } while (calls < min_calls || timer.seconds() < min_time);
    best = std::min(best, timer.seconds() / static_cast<double>(calls));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> types = split("f32,f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q4_k,q5_k,q6_k");
  std::vector<std::string> shapes = split("896x896,4864x896,896x4864,151936x896");
  std::vector<std::string> threads = split("1,2");
  std::vector<std::string> tokens = split("1,512");
  triad::IsaLevel isa = triad::best_isa();
  double min_time = 0.25;
  bool resident = false;
  std::vector<std::string> layouts = split("gguf,lanes,panels");
  int64_t batch = 512;
  bool stream_batch = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--types") types = split(v);
    else if (a == "--shapes") shapes = split(v);
    else if (a == "--threads") threads = split(v);
    else if (a == "--tokens") tokens = split(v);
    else if (a == "--min-time") min_time = std::atof(v.c_str());
    else if (a == "--resident") resident = v == "1";
    else if (a == "--layout") layouts = split(v);
    else if (a == "--stream-batch") stream_batch = v == "1";
    else if (a == "--batch") batch = std::max<int64_t>(2, std::atoll(v.c_str()));
    else if (a == "--isa") isa = v == "scalar" ? triad::IsaLevel::kScalar
                                : v == "avx2" ? triad::IsaLevel::kAvx2 : triad::IsaLevel::kAvx512;
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  // GGUF rows first: the other layouts are re-laid in the same buffer.
  std::stable_sort(layouts.begin(), layouts.end(), [](const std::string& a, const std::string& b) {
    return a == "gguf" && b != "gguf";
  });
  if (!triad::kernels::matmul_isa_supported(isa)) {
    std::fprintf(stderr, "ISA %s not supported here\n", triad::isa_name(isa));
    return 2;
  }
  std::printf("matmul_bench: ISA %s, /proc/cpuinfo %.0f MHz\n", triad::isa_name(isa), cpu_mhz());
  for (const std::string& th : threads) {
    triad::ThreadPool pool(std::atoi(th.c_str()));
    std::printf("  DRAM read roofline, %s thread(s): %.1f GB/s\n", th.c_str(),
                triad::kernels::measure_read_bandwidth_gbs(pool, size_t{512} << 20, 5));
  }
  if (triad::kernels::matmul_isa_supported(triad::IsaLevel::kAvx512)) {
    const triad::bench::PeakRates p = triad::bench::measure_peak_avx512(20000000);
    std::printf("  per-core peaks (measured): FMA %.1f GFLOP/s (%.2f GHz x 32), VNNI %.1f GOP/s (x128), ",
                p.fma * 32e-9, p.fma * 1e-9, p.vnni * 128e-9);
    if (p.bf16 > 0) std::printf("BF16 dot %.1f GFLOP/s (x64)\n", p.bf16 * 64e-9);
    else std::printf("no BF16 dot (BF16 weights: two FMAs per pair)\n");
  } else if (triad::kernels::matmul_isa_supported(triad::IsaLevel::kAvx2)) {
    const double fma = triad::bench::measure_fma_peak_avx2(20000000);
    std::printf("  per-core peak (measured): 256-bit FMA %.1f GFLOP/s (%.2f G/s x 16)\n", fma * 16e-9, fma * 1e-9);
  }
  const std::string batch_col = "n=" + std::to_string(batch) + " GFLOP/s";
  std::printf("\n%-8s %-11s %3s %9s %8s %6s %14s\n", "type", "rows x cols", "thr", "n=1 GB/s",
              "roofline", "ratio", batch_col.c_str());
  Rng rng;
  for (const std::string& tn : types) {
    const DType t = parse_type(tn);
    for (const std::string& sh : shapes) {
      const Shape s{std::atoll(sh.c_str()), std::atoll(sh.c_str() + sh.find('x') + 1)};
      if (s.cols % triad::traits(t).block_size != 0) {
        std::printf("%-5s %-11s   -   (cols %% %u != 0: not a valid %s matrix)\n", tn.c_str(), sh.c_str(),
                    triad::traits(t).block_size, tn.c_str());
        continue;
      }
      const uint64_t mbytes = triad::row_bytes(t, static_cast<uint64_t>(s.cols)) * static_cast<uint64_t>(s.rows);
      // n=1: enough copies to exceed the caches (>= 256 MiB in all).
      const uint64_t copies = resident ? 1 : std::max<uint64_t>(1, (uint64_t{256} << 20) / mbytes);
      const bool want1 = std::find(tokens.begin(), tokens.end(), "1") != tokens.end();
      const bool want512 = std::any_of(tokens.begin(), tokens.end(), [](const std::string& n) { return n != "1"; });
      const uint64_t ncopies = want1 || stream_batch ? copies : 1;
      triad::AlignedBuffer<uint8_t> w(mbytes * ncopies);
      fill_weights(t, w.data(), mbytes, rng);
      for (uint64_t c = 1; c < ncopies; ++c) std::memcpy(w.data() + c * mbytes, w.data(), mbytes);
      // 64-byte aligned, as the engine's activations are (a vector's large allocation starts 16
      // bytes into a page, so every 512-bit load would split two cache lines).
      triad::AlignedBuffer<float> x(static_cast<size_t>(std::max<int64_t>(512, batch) * s.cols)),
          y(static_cast<size_t>(std::max<int64_t>(512, batch) * s.rows));
      // Row scales for the online types (null for the GGUF ones).
      std::vector<float> scales(triad::dtype_has_row_scale(t) ? static_cast<size_t>(s.rows) : 0, 0.01f);
      const float* rs = scales.empty() ? nullptr : scales.data();
      for (size_t i = 0; i < x.size(); ++i) x.data()[i] = rng.uniform();
      std::string held = "gguf";  // the layout w is in
      for (const std::string& layout : layouts) {
      const bool lanes = layout == "lanes", panels = layout == "panels";
      if (lanes && !triad::kernels::lane_layout_supported(t)) continue;
      if (panels && !triad::kernels::panel_layout_fits(t, s.rows)) continue;
      if (layout != held) {  // re-lay every copy, 16 rows at a time, as a model load does
        const uint64_t rb = triad::row_bytes(t, static_cast<uint64_t>(s.cols));
        std::vector<uint8_t> tmp(static_cast<size_t>(16 * rb));
        const uint64_t total = w.size() / rb;  // whole copies of rows; panels: a multiple of 16
        for (uint64_t r = 0; r < total; r += 16) {
          const uint64_t n = std::min<uint64_t>(16, total - r);
          uint8_t* at = w.data() + r * rb;
          if (held == "panels") {
            triad::kernels::panel_to_rows(t, at, s.cols, tmp.data());
          } else {
            for (uint64_t i = 0; i < n; ++i) {
              if (held == "lanes") {
                triad::kernels::row_from_lanes(t, at + i * rb, s.cols, tmp.data() + i * rb);
              } else {
                std::memcpy(tmp.data() + i * rb, at + i * rb, rb);
              }
            }
          }
          if (panels) {
            triad::kernels::panel_from_rows(t, tmp.data(), s.cols, at);
          } else {
            for (uint64_t i = 0; i < n; ++i) {
              if (lanes) {
                triad::kernels::row_to_lanes(t, tmp.data() + i * rb, s.cols, at + i * rb);
              } else {
                std::memcpy(at + i * rb, tmp.data() + i * rb, rb);
              }
            }
          }
        }
        held = layout;
      }
      const std::string label = tn + (lanes ? "~L" : panels ? "~P" : "");
      for (const std::string& th : threads) {
        triad::ThreadPool pool(std::atoi(th.c_str()));
        double gbs = 0, gflops = 0;
        double roof = 0;
        if (want1) {
          // Alternate kernel trials with read-bandwidth probes (the host's memory bandwidth
          // drifts on a shared VM) and report the best of each.
          double sec = 1e30;
          for (int round = 0; round < 5; ++round) {
            roof = std::max(roof, triad::kernels::measure_read_bandwidth_gbs(pool, size_t{256} << 20, 2));
            sec = std::min(sec, best_seconds(
                [&](int64_t call) {
                  const triad::kernels::WeightMatrix wm{
                      t, w.data() + (static_cast<uint64_t>(call) % copies) * mbytes, s.rows, s.cols, rs, lanes, panels};
                  triad::kernels::matmul_isa(isa, wm, x.data(), 1, s.cols, y.data(), s.rows, pool);
                },
                min_time / 3, 2, static_cast<int>(std::min<uint64_t>(copies, 100000))));
          }
          gbs = static_cast<double>(mbytes) / sec * 1e-9;
        }
        if (want512) {
          const uint64_t bcopies = stream_batch ? ncopies : 1;  // one copy: cache-resident where it fits
          const double sec = best_seconds(
              [&](int64_t call) {
                const triad::kernels::WeightMatrix wm{
                    t, w.data() + (static_cast<uint64_t>(call) % bcopies) * mbytes, s.rows, s.cols, rs, lanes, panels};
                triad::kernels::matmul_isa(isa, wm, x.data(), batch, s.cols, y.data(), s.rows, pool);
              },
              min_time, 3, static_cast<int>(std::min<uint64_t>(bcopies, 1000)));
          gflops = 2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) * static_cast<double>(batch) / sec * 1e-9;
        }
        std::printf("%-8s %-11s %3s %9.1f %8.1f %5.0f%% %14.1f\n", label.c_str(), sh.c_str(), th.c_str(),
                    gbs, roof, roof > 0 ? 100.0 * gbs / roof : 0.0, gflops);
        std::fflush(stdout);
      }
      }
    }
  }
  return 0;
}

// `triad quantize IN.gguf OUT.gguf TYPE`: writes a quantized copy of a GGUF model with
// llama.cpp's quantization mixes and per-tensor rules (src/quant/mix.h), optionally guided by
// an importance matrix. Logs one line per tensor (name, shape, types, relative RMS error) and
// a progress bar on a terminal; prints a summary (size, bits per weight, MB/s).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/cpu_features.h"
#include "base/error.h"
#include "base/log.h"
#include "base/thread_pool.h"
#include "commands.h"
#include "quant/imatrix.h"
#include "quant/quantize.h"
#include "quant/quantize_model.h"

namespace triad::app {
namespace {

struct QuantizeCli {
  std::string in, out, type;
  std::string imatrix;
  std::vector<std::string> tensor_types;
  std::string output_type, token_embd_type;
  bool pure = false, allow_requantize = false, no_error = false;
  int threads = 0;
};

DType type_arg(const std::string& flag, const std::string& v) {
  const auto t = quant::parse_type_name(v);
  if (!t) fail(flag, ": unknown type '", v, "'");
  TRIAD_CHECK(quant::can_quantize(*t), flag, ": Triad cannot write ", v);
  return *t;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  for (size_t i = 0; i < s.size(); ++i) o << (i ? " x " : "") << s[i];
  return o.str();
}

std::string mix_list() {
  std::ostringstream o;
  for (const quant::Mix& m : quant::mixes()) o << "\n  " << m.name << "\t" << m.summary;
  return o.str();
}

int run(const QuantizeCli& c) {
  const auto mix = quant::find_mix(c.type);
  if (!mix) fail("unknown quantization type '", c.type, "'; choose one of:", mix_list());
  quant::QuantizeOptions opt{*mix, {}, c.allow_requantize, nullptr, c.imatrix, !c.no_error};
  opt.mix_options.pure = c.pure;
  for (const std::string& s : c.tensor_types) {
    opt.mix_options.overrides.push_back(quant::parse_override(s));
    TRIAD_CHECK(quant::can_quantize(opt.mix_options.overrides.back().type), "--tensor-type ", s,
                ": Triad cannot write that type");
  }
  if (!c.output_type.empty()) opt.mix_options.output_type = type_arg("--output-tensor-type", c.output_type);
  if (!c.token_embd_type.empty())
    opt.mix_options.token_embedding_type = type_arg("--token-embedding-type", c.token_embd_type);
  std::unique_ptr<quant::Imatrix> im;
  if (!c.imatrix.empty()) {
    im = std::make_unique<quant::Imatrix>(quant::Imatrix::load(c.imatrix));
    opt.imatrix = im.get();
    opt.mix_options.has_imatrix = true;
    log_info("imatrix: ", im->size(), " entries from ", c.imatrix, " (", im->chunk_count,
             " chunks of ", im->chunk_size, " tokens)");
  }
  const int threads = c.threads > 0 ? c.threads : physical_cores();
  ThreadPool pool(threads);
  log_info("quantizing ", c.in, " -> ", c.out, " as ", mix->name, " (", threads, " threads)");
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto progress = [&](size_t i, size_t n, const quant::TensorReport& r) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%4zu/%4zu] %-36s %-18s %5s -> %-5s", i + 1, n, r.name.c_str(),
                 shape_str(r.shape).c_str(), std::string(dtype_name(r.from)).c_str(),
                 std::string(dtype_name(r.to)).c_str());
    if (r.quantized && !c.no_error) std::fprintf(stderr, "  rel.err %.5f", r.rel_rmse);
    if (r.fallback) std::fprintf(stderr, "  (fallback: rows of %lld)", static_cast<long long>(r.shape[0]));
    if (r.used_imatrix) std::fprintf(stderr, "  imatrix");
    std::fprintf(stderr, "\n");
    if (tty && i + 1 < n) {
      const int width = 40, done = static_cast<int>(width * (i + 1) / n);
      std::fprintf(stderr, "[%s%s] %zu%%", std::string(static_cast<size_t>(done), '#').c_str(),
                   std::string(static_cast<size_t>(width - done), '.').c_str(), 100 * (i + 1) / n);
    }
    std::fflush(stderr);
  };
  const quant::QuantizeSummary s = quant::quantize_model(c.in, c.out, opt, pool, progress);
  const double mib = 1024.0 * 1024.0;
  std::printf("wrote %s: %s, %.1f MiB -> %.1f MiB (%.2f bits per weight), %.1f s, %.1f MB/s of input\n",
              c.out.c_str(), mix->name.c_str(), static_cast<double>(s.bytes_in) / mib,
              static_cast<double>(s.bytes_out) / mib, s.bits_per_weight(), s.seconds,
              static_cast<double>(s.bytes_in) / 1e6 / std::max(1e-9, s.seconds));
  return 0;
}

}  // namespace

Command add_quantize(CLI::App& app) {
  auto c = std::make_shared<QuantizeCli>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "write a quantized copy of a GGUF model (llama.cpp's mixes and bit layouts)");
  cmd->footer("TYPE is one of:" + mix_list() +
              "\nSingle types for --tensor-type and friends: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 "
              "Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4");
  cmd->add_option("input", c->in, "input GGUF (F32/F16/BF16 weights)")->required()->check(CLI::ExistingFile);
  cmd->add_option("output", c->out, "output GGUF (written via OUTPUT.tmp)")->required();
  cmd->add_option("type", c->type, "quantization mix, e.g. Q4_K_M")->required();
  cmd->add_option("--imatrix", c->imatrix, "importance matrix (llama.cpp imatrix GGUF)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tensor-type", c->tensor_types,
                  "REGEX=TYPE: tensors whose name matches get TYPE (repeatable; first match wins)");
  cmd->add_option("--output-tensor-type", c->output_type, "type of output.weight");
  cmd->add_option("--token-embedding-type", c->token_embd_type, "type of token_embd.weight");
  cmd->add_flag("--pure", c->pure, "no mix rules: every quantized tensor gets the base type");
  cmd->add_flag("--allow-requantize", c->allow_requantize,
                "allow already-quantized input tensors to be requantized");
  cmd->add_flag("--no-error", c->no_error, "skip measuring each tensor's quantization error");
  cmd->add_option("-t,--threads", c->threads, "worker threads (default: physical cores)")
      ->check(CLI::Range(0, 1024));
  return [c] { return run(*c); };
}

}  // namespace triad::app

// `triad convert HF_DIR -o OUT.gguf [--outtype f32|f16|bf16|q8_0]`: a Hugging Face model folder
// (config.json, safetensors, tokenizer.json) to GGUF (src/convert/hf_convert.h), with a progress
// line per tensor and a summary (sizes, MB/s).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "base/log.h"
#include "convert/hf_convert.h"

namespace triad::app {
namespace {

struct ConvertCli {
  std::string dir, out, outtype = "f16";
};

int run_convert(const ConvertCli& c) {
  convert::ConvertOptions opt;
  opt.out_type = convert::parse_out_type(c.outtype);
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto progress = [&](const convert::ConvertProgress& p) {
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "[%4zu/%4zu] %-48s -> %-28s %s%s", p.index + 1, p.count, p.hf_name.c_str(), p.gguf_name.c_str(),
                 std::string(dtype_name(p.type)).c_str(), tty ? "" : "\n");
    std::fflush(stderr);
  };
  const convert::ConvertSummary s = convert::convert_hf(c.dir, c.out, opt, progress);
  if (tty) std::fprintf(stderr, "\n");
  const double mib = 1024.0 * 1024.0;
  std::printf("wrote %s: %s, %zu tensors, %.1f MiB -> %.1f MiB (%s), %.1f s, %.1f MB/s of input\n", c.out.c_str(),
              s.architecture.c_str(), s.tensors, static_cast<double>(s.bytes_in) / mib,
              static_cast<double>(s.bytes_out) / mib, c.outtype.c_str(), s.seconds,
              static_cast<double>(s.bytes_in) / 1e6 / std::max(1e-9, s.seconds));
  return 0;
}

}  // namespace

Command add_convert(CLI::App& app) {
  auto c = std::make_shared<ConvertCli>();
  CLI::App* cmd = app.add_subcommand("convert", "convert a Hugging Face model folder (config.json, safetensors, tokenizer.json) to GGUF");
  cmd->footer("Supported so far: Qwen2, Qwen3, Llama and Mistral models with a byte-level BPE tokenizer.json.");
  cmd->add_option("dir", c->dir, "the model folder")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("-o,--out", c->out, "the GGUF file to write")->required();
  cmd->add_option("--outtype", c->outtype, "f32, f16 (default), bf16 or q8_0; 1-D tensors stay f32")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "q8_0"}));
  return [c] { return run_convert(*c); };
}

}  // namespace triad::app

// Quantization mixes ("Q4_K_M", "Q8_0", ...) and the per-tensor type each one gives, with the
// rules llama.cpp's quantizer applies, so a Triad Q4_K_M file has the same tensor types as
// llama.cpp's for the same model:
// - Which tensors are quantized: weights of two or more dimensions, except the MoE router
//   (ffn_gate_inp), position / token-type embeddings and convolution kernels; everything else
//   is copied as it is.
// - The output matrix (or the token embedding when the output is tied to it) becomes Q6_K
//   (Q8_0 when its rows are not a multiple of 256, or for the Q8_0 mix).
// - attention V and FFN down of some layers keep more bits in the _M / _S / _L mixes (the
//   "use_more_bits" layers: the first and last eighth and every third layer between), Q2_K and
//   Q3_K mixes raise attention output, and so on (mix.cpp lists each rule).
// - Rows that the chosen type cannot hold (not a multiple of its block size) fall back:
//   Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1,
//   Q6_K -> Q8_0, and F16 when even 32 does not divide the row.
// - User choices win over the mix: --tensor-type REGEX=TYPE (first match, honoured even when
//   it names the mix's base type), --output-tensor-type, --token-embedding-type; --pure turns
//   the mix rules off (every quantized tensor gets the base type).
// Thread-safety: Mix is immutable; choose_type is const.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace triad::quant {

struct Mix {
  std::string name;      // "Q4_K_M"
  DType base;            // the type most tensors get
  uint32_t file_type;    // llama.cpp's llama_ftype number (general.file_type)
  std::string_view summary;
};

// The mixes `triad quantize` offers, in order of size.
const std::vector<Mix>& mixes();
// Case-insensitive lookup ("q4_k_m" works; "Q3_K", "Q4_K", "Q5_K" mean their _M mix, as in
// llama.cpp); nullopt when unknown.
std::optional<Mix> find_mix(std::string_view name);
// The type llama.cpp uses instead of t for rows whose length t's block size does not divide
// (Q2_K/Q3_K -> Q4_0, IQ4_XS -> IQ4_NL, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; t itself for
// the 32-block types).
DType row_fallback_type(DType t);
// A single type by GGUF name ("q6_k", "f16", ...), case-insensitive; nullopt when unknown.
std::optional<DType> parse_type_name(std::string_view name);

// What the model looks like, as far as the rules need to know.
struct ModelShape {
  std::string arch;     // general.architecture
  int n_layer = 0;      // blocks (block_count)
  int n_head = 1, n_head_kv = 1;
  int n_expert = 0;
  bool has_output = true;  // a separate output.weight exists (else tied to token_embd)
};

// A compiled --tensor-type pattern (PCRE2, searched anywhere in the name like std::regex_search
// and llama.cpp's overrides).
class NamePattern {
 public:
  explicit NamePattern(const std::string& pattern);  // throws triad::Error on a bad pattern
  bool search(std::string_view name) const;
 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

struct TensorTypeOverride {
  std::string pattern;  // as given, for messages
  NamePattern re;
  DType type;
};

struct MixOptions {
  bool pure = false;
  bool has_imatrix = false;
  std::optional<DType> output_type;
  std::optional<DType> token_embedding_type;
  std::vector<TensorTypeOverride> overrides;
};

// llama.cpp's tensor order: "blk.N." tensors by N (others, N = -1, first), then by name.
bool tensor_order(std::string_view a, std::string_view b);

// Parses "REGEX=TYPE" (throws triad::Error naming the problem).
TensorTypeOverride parse_override(const std::string& spec);

// Whether a tensor of this name and shape is quantized at all (else copied unchanged).
bool should_quantize(std::string_view name, int n_dims);

struct TypeChoice {
  DType type;
  bool fallback = false;  // the wanted type could not hold the rows; `wanted` says what it was
  DType wanted;
  bool user = false;      // the type came from an override or an explicit output/embedding type
};

// Which attention-V / FFN-down matrix this is. As in llama.cpp, a tensor's place in the rules
// that depend on the layer ("the first eighth of the layers ...") is its position among the
// attn_v (ffn_down) tensors in llama.cpp's processing order: by block number, then by name
// (tensor_order below). (MoE files use the number in the name for ffn_down, as llama.cpp does.)
struct MixCounters {
  int n_attn_v = 0, n_ffn_down = 0;  // how many the file has (count them first)
  int i_attn_v = 0, i_ffn_down = 0;  // advanced by choose_type
  // Counts the attn_v / ffn_down weights among these names.
  void count(std::string_view name);
};

// The type for one quantized tensor (call in file order). ne0 is its row length, n_mat the
// number of stacked matrices (experts; ne[2]).
TypeChoice choose_type(const Mix& mix, const MixOptions& opt, const ModelShape& shape,
                       std::string_view name, int64_t ne0, MixCounters& counters,
                       int64_t n_mat = 1);

}  // namespace triad::quant

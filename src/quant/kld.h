// KL divergence of a candidate model against a base model's stored log-probabilities, with the
// definitions, windowing and file format of llama.cpp's llama-perplexity, so figures (and base
// files) are interchangeable between the two tools.
//
// Base file ("logits file"), little-endian:
//   "_logits_" (8 bytes), uint32 n_ctx, int32 n_vocab, int32 n_chunk,
//   int32 tokens[n_chunk * n_ctx]     (the text's tokens, chunk by chunk, BOS not substituted)
//   then for each chunk, for each scored position j = n_ctx/2 .. n_ctx-2, a record of
//   nv = 2 * ceil(n_vocab / 2) + 4 uint16: float scale, float min_log_prob (as 4 uint16), then
//   one uint16 code per vocabulary entry (zero padded to nv): log p_i ~= scale * code_i +
//   min_log_prob, where logits below max - 16 clamp to code 0 (p < e^-16 is dropped).
// Statistics per scored token (the token after position j is the text's next token t):
//   nll = -log q(t), nll_base = -log p(t) (decoded), KLD = sum over i with log p_i > -16 of
//   p_i * (log p_i - log q_i), top-1 agreement = argmax q == argmax p (first of equals),
//   dp = q(t) - p(t), and |dq_top| = |q(i*) - p(i*)| at the base's top token i*.
// Means come with standard errors sqrt(var / (n - 1)); percentiles interpolate linearly between
// order statistics; the perplexity ratio's error uses the covariance of the two NLLs.
// Thread-safety: KldBaseWriter/KldBaseReader/KldStats are single-threaded objects.
#pragma once

#include <cstdint>
#include <fstream>
#include <istream>
#include <string>
#include <vector>

namespace triad::quant {

// Bytes of one stored position record: nv uint16.
inline int64_t kld_record_u16(int32_t n_vocab) { return 2 * ((int64_t{n_vocab} + 1) / 2) + 4; }

// Encodes one position's logits (n_vocab floats) into a record of kld_record_u16 uint16.
// Returns the NLL of token `next` under these logits.
double encode_log_probs(const float* logits, int32_t n_vocab, int32_t next, uint16_t* record);

class KldBaseWriter {
 public:
  // Opens `path` (through path.tmp, renamed by finish()) and writes the header and tokens.
  KldBaseWriter(const std::string& path, uint32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                const std::vector<int32_t>& tokens);
  ~KldBaseWriter();  // removes the temporary file unless finish() succeeded
  // Appends the records of one chunk's scored positions: logits [n_ctx x n_vocab] of the whole
  // chunk, chunk tokens [n_ctx]. Returns the chunk's summed NLL.
  double add_chunk(const float* logits, const int32_t* chunk_tokens);
  void finish();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  uint32_t n_ctx_;
  int32_t n_vocab_, n_chunk_, written_ = 0;
  std::vector<uint16_t> rec_;
  bool done_ = false;
};

class KldBaseReader {
 public:
  // Reads and checks the header and tokens (throws triad::Error naming the problem: bad magic,
  // sizes out of range, a token id >= n_vocab, or a file size that does not match).
  // expected_size: the whole stream's size in bytes (the records are read lazily).
  KldBaseReader(std::istream& in, uint64_t expected_size);
  uint32_t n_ctx() const { return n_ctx_; }
  int32_t n_vocab() const { return n_vocab_; }
  int32_t n_chunk() const { return n_chunk_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Reads the next chunk's records: (n_ctx - 1 - n_ctx/2) x kld_record_u16(n_vocab) uint16.
  void read_chunk(std::vector<uint16_t>& records);

 private:
  std::istream& in_;
  uint32_t n_ctx_ = 0;
  int32_t n_vocab_ = 0, n_chunk_ = 0, read_ = 0;
  std::vector<int32_t> tokens_;
};

struct KldSummary {
  int64_t count = 0;
  double ppl = 0, ppl_err = 0, ppl_base = 0, ppl_base_err = 0;
  double ppl_ratio = 0, ppl_ratio_err = 0;  // PPL(Q) / PPL(base)
  double kld_mean = 0, kld_err = 0, kld_median = 0, kld_p99 = 0, kld_p999 = 0, kld_max = 0;
  double top1 = 0, top1_err = 0;            // fraction of positions with the same top token
  double dp_mean = 0, dp_err = 0, dp_rms = 0, dp_p99 = 0;   // q(t) - p(t), as llama.cpp
  double dtop_mean = 0, dtop_err = 0, dtop_p99 = 0;         // |q - p| at the base's top token
  std::string to_json() const;
};

class KldStats {
 public:
  explicit KldStats(int32_t n_vocab) : n_vocab_(n_vocab) {}
  // One scored position: candidate logits [n_vocab], the base record, the next token.
  void add(const float* logits, const uint16_t* record, int32_t next);
  // Every scored position of one chunk (the windowing of KldBaseWriter::add_chunk): candidate
  // logits [n_ctx x n_vocab], the chunk's records (KldBaseReader::read_chunk), its tokens.
  void add_chunk(const float* logits, const uint16_t* records, const int32_t* chunk_tokens, int32_t n_ctx);
  KldSummary summary() const;
  int64_t count() const { return static_cast<int64_t>(kld_.size()); }

 private:
  int32_t n_vocab_;
  double sum_nll_ = 0, sum_nll2_ = 0, sum_nllb_ = 0, sum_nllb2_ = 0, sum_cross_ = 0;
  double sum_kld_ = 0, sum_kld2_ = 0, sum_dp_ = 0, sum_dp2_ = 0, sum_dtop_ = 0, sum_dtop2_ = 0;
  int64_t same_top_ = 0;
  std::vector<float> kld_, dp_, dtop_;
};

}  // namespace triad::quant

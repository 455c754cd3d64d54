// How the next token is chosen from the logits: HF's logits processors in HF's order
// (repetition penalty, then temperature, top-k, top-p and min-p when sampling), then the argmax
// or a draw from a seeded generator.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace shardformer {

// HF GenerationConfig's fields of the same names and defaults.
struct SamplingConfig {
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;  // 0: off
  double top_p = 1.0;
  std::optional<double> min_p;
  double repetition_penalty = 1.0;  // also applied when greedy, as in HF
  uint64_t seed = 0;                // of the draws: a seeded run gives the same tokens again
};

// The scores HF's processors give for `logits` [batch, vocab] after `sequences` [batch, len]
// (the prompts, left padding included, and the tokens chosen so far): [batch, vocab] float,
// filtered entries at -inf.
at::Tensor process_logits(const at::Tensor& logits, const at::Tensor& sequences,
                          const SamplingConfig& config);

// Chooses tokens step after step; the draws come from one generator seeded at construction.
class TokenChooser {
 public:
  explicit TokenChooser(const SamplingConfig& config);
  // [batch] int64: the argmax of the processed scores, or a draw from their softmax.
  at::Tensor next(const at::Tensor& logits, const at::Tensor& sequences);

 private:
  SamplingConfig config_;
  at::Generator generator_;
};

}  // namespace shardformer

// How the next token is chosen from the logits: HF's logits processors in HF's order
// (repetition penalty, suppressed tokens, Whisper's timestamp rules, then temperature, top-k,
// top-p and min-p when sampling), then the argmax or a draw from a seeded generator.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace shardformer {

// Whisper's timestamp tokens (HF's WhisperTimeStampLogitsProcessor): the ids after
// no_timestamps_token_id, chosen in pairs that never go back in time, one first.
struct TimestampRules {
  int64_t no_timestamps_token_id = 0;  // never chosen; timestamps begin at the next id
  int64_t eos_token_id = 0;            // a lone timestamp may be followed by it or by another
  std::optional<int64_t> max_initial_timestamp_index;  // the latest first timestamp
  int64_t timestamp_begin() const { return no_timestamps_token_id + 1; }
};

// HF GenerationConfig's fields of the same names and defaults.
struct SamplingConfig {
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;  // 0: off
  double top_p = 1.0;
  std::optional<double> min_p{};
  double repetition_penalty = 1.0;         // also applied when greedy, as in HF
  uint64_t seed = 0;                       // of the draws: a seeded run gives the same tokens again
  std::vector<int64_t> suppress_tokens{};  // never chosen
  std::vector<int64_t> begin_suppress_tokens{};  // not chosen as the first new token
  std::optional<TimestampRules> timestamps{};
  // The length of the sequences when the first new token is chosen (the prompt's, or the
  // decoder prompt's); generate() sets it.
  int64_t begin_index = 0;
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

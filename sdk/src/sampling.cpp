// HF's logits processors (RepetitionPenalty, Temperature, TopK, TopP, MinP), written with the
// same tensor operations in the same order so that the processed scores equal HF's, and the
// seeded draw of the next token.
#include "shardformer/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

namespace shardformer {
namespace {

constexpr double kFiltered = -std::numeric_limits<double>::infinity();

// RepetitionPenaltyLogitsProcessor: every id seen is made less likely.
at::Tensor repetition_penalty(const at::Tensor& scores, const at::Tensor& sequences,
                              double penalty) {
  const at::Tensor seen = scores.gather(1, sequences);  // [batch, len]
  const at::Tensor penalized = at::where(seen < 0, seen * penalty, seen / penalty);
  return scores.scatter(1, sequences, penalized);
}

at::Tensor top_k(const at::Tensor& scores, int64_t k) {
  k = std::min(k, scores.size(-1));
  const at::Tensor kth = std::get<0>(at::topk(scores, k)).select(-1, k - 1).unsqueeze(-1);
  return scores.masked_fill(scores < kth, kFiltered);
}

at::Tensor top_p(const at::Tensor& scores, double p) {
  auto [sorted, indices] = at::sort(scores, -1, /*descending=*/false);
  const at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
  at::Tensor remove = cumulative <= (1 - p);
  remove.narrow(-1, remove.size(-1) - 1, 1).fill_(false);  // keep at least one
  return scores.masked_fill(remove.scatter(1, indices, remove), kFiltered);
}

at::Tensor min_p(const at::Tensor& scores, double p) {
  const at::Tensor probs = scores.softmax(-1);
  const at::Tensor threshold = probs.amax(-1, true) * p;
  at::Tensor remove = probs < threshold;
  remove.scatter_(-1, std::get<1>(at::topk(probs, 1)), false);
  return scores.masked_fill(remove, kFiltered);
}

}  // namespace

at::Tensor process_logits(const at::Tensor& logits, const at::Tensor& sequences,
                          const SamplingConfig& config) {
  at::Tensor scores = logits.to(at::kFloat);
  if (config.repetition_penalty != 1.0) {
    scores = repetition_penalty(scores, sequences.to(scores.device()), config.repetition_penalty);
  }
  if (!config.do_sample) return scores;
  if (config.temperature != 1.0) scores = scores / config.temperature;
  if (config.top_k != 0) scores = top_k(scores, config.top_k);
  if (config.top_p < 1.0) scores = top_p(scores, config.top_p);
  if (config.min_p) scores = min_p(scores, *config.min_p);
  return scores;
}

TokenChooser::TokenChooser(const SamplingConfig& config)
    : config_(config), generator_(at::make_generator<at::CPUGeneratorImpl>(config.seed)) {}

at::Tensor TokenChooser::next(const at::Tensor& logits, const at::Tensor& sequences) {
  const at::Tensor scores = process_logits(logits, sequences, config_);  // [batch, vocab]
  if (!config_.do_sample) return scores.argmax(-1);
  // Drawn on the CPU from this chooser's generator: the same on every rank and device.
  const at::Tensor probs = scores.softmax(-1).cpu();
  return at::multinomial(probs, 1, false, generator_).squeeze(1).to(logits.device());
}

}  // namespace shardformer

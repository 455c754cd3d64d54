// Language-model losses as HF computes them, including vocab-parallel cross-entropy that never
// gathers the full logits (max and sum all-reduced over the tensor-parallel group).
#pragma once

#include "shardformer/layers/embedding.h"

#include <ATen/Tensor.h>

namespace shardformer {

inline constexpr int64_t kIgnoreIndex = -100;

// Per-row cross-entropy of vocabulary-sliced logits [rows, vocab/tp] against targets [rows]
// (kIgnoreIndex rows give 0). Differentiable; the backward needs no communication.
at::Tensor vocab_parallel_cross_entropy(const layers::VocabLogits& logits,
                                        const at::Tensor& targets);

// Mean causal-LM loss: logits at position t predict labels at t + 1; labels equal to
// kIgnoreIndex are skipped. logits [batch, seq, vocab] (whole or vocab-parallel), labels
// [batch, seq] int64.
at::Tensor causal_lm_loss(const layers::VocabLogits& logits, const at::Tensor& labels);

}  // namespace shardformer

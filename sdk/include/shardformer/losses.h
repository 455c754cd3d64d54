// Language-model losses as HF computes them, including vocab-parallel cross-entropy that never
// gathers the full logits (max and sum all-reduced over the tensor-parallel group).
#pragma once

#include "shardformer/layers/embedding.h"
#include "shardformer/model.h"

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

// Mean cross-entropy of logits [..., classes] (whole or vocab-parallel) against labels [...]
// at the same positions, kIgnoreIndex skipped: the masked-LM loss ([batch, seq]) and the
// single-label classification loss ([batch]).
at::Tensor cross_entropy_loss(const layers::VocabLogits& logits, const at::Tensor& labels);

// An encoder-decoder's decoder inputs from its labels [batch, tgt]: shifted right by one,
// `start` (decoder_start_token_id) first, kIgnoreIndex replaced by `pad` (HF's _shift_right,
// shift_tokens_right).
at::Tensor shift_right(const at::Tensor& labels, int64_t start, int64_t pad);

// The loss of `task` (causal LM: shifted; masked LM, seq2seq LM and classification: unshifted).
at::Tensor task_loss(ModelTask task, const layers::VocabLogits& logits, const at::Tensor& labels);

// The number of labels `task`'s loss averages over (a pipeline weights micro-batches by it).
int64_t counted_labels(ModelTask task, const at::Tensor& labels);

}  // namespace shardformer

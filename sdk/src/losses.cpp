// Causal-LM loss and vocab-parallel cross-entropy (Megatron's formulation).
#include "shardformer/losses.h"

#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <limits>

namespace shardformer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Per row of logits [rows, vocab(/tp)]: {max, sum of exp(logits - max)} over the whole
// vocabulary. Each rank reduces its slice (the fused kernel on CPU fp32, ATen's ops otherwise),
// then the slices' sums are rescaled to the group's max and added.
std::pair<at::Tensor, at::Tensor> softmax_stats(const at::Tensor& logits,
                                                const distributed::ProcessGroup* group) {
  at::Tensor max, sum;  // [rows]
  if (kernels::softmax_cross_entropy_applies(logits)) {
    std::tie(max, sum) = kernels::softmax_stats(logits);
  } else {
    max = std::get<0>(logits.max(-1));
    sum = (logits - max.unsqueeze(-1)).exp().sum(-1);
  }
  if (group == nullptr || group->size() == 1) return {max, sum};
  // A rank whose slice is all vocabulary padding (-inf: a small vocabulary padded for many
  // ranks) has max -inf and sum exp(-inf - -inf) = NaN; its share of the sum is 0.
  sum = sum.masked_fill(max == -std::numeric_limits<double>::infinity(), 0.0);
  at::Tensor global = max.clone();
  group->all_reduce_(global, distributed::ReduceOp::kMax);
  sum = sum * (max - global).exp();
  group->all_reduce_(sum);
  return {global, sum};
}

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  // logits [rows, local_vocab] holding the vocabulary from vocab_start on, targets [rows] ->
  // loss [rows]. group: the ranks splitting the vocabulary, or null when the logits are whole.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, int64_t vocab_start,
                            const distributed::ProcessGroup* group) {
    const int64_t local_vocab = logits.size(-1);
    const auto [max, sum] = softmax_stats(logits, group);
    const at::Tensor ignored = targets == kIgnoreIndex;
    const at::Tensor elsewhere =
        ignored | (targets < vocab_start) | (targets >= vocab_start + local_vocab);
    const at::Tensor local_targets = (targets - vocab_start).masked_fill(elsewhere, -1);  // [rows]
    at::Tensor target_logit =  // [rows]: the target's logit minus the max, from its rank
        (logits.gather(-1, local_targets.clamp_min(0).unsqueeze(-1)).squeeze(-1) - max)
            .masked_fill(elsewhere, 0.0);
    if (group != nullptr) group->all_reduce_(target_logit);
    const at::Tensor loss = (sum.log() - target_logit).masked_fill(ignored, 0.0);
    // The logits themselves are kept, not their softmax: the caller holds them anyway, and the
    // backward recomputes exp(logits - max) / sum in the same pass that writes the gradient.
    ctx->save_for_backward({logits, max, sum, local_targets, ignored});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& logits = saved[0];
    const at::Tensor& max = saved[1];
    const at::Tensor& sum = saved[2];
    const at::Tensor& local_targets = saved[3];  // -1 where the target is not on this rank
    const at::Tensor scale =                     // [rows]: d total / d loss[r], 0 for ignored rows
        (grads[0] * (~saved[4]).to(grads[0].scalar_type())).to(logits.scalar_type()).contiguous();
    if (kernels::softmax_cross_entropy_applies(logits)) {  // (softmax - one_hot) * scale
      return {kernels::softmax_cross_entropy_grad(logits, max, sum, local_targets, scale),
              at::Tensor(), at::Tensor(), at::Tensor()};
    }
    at::Tensor grad = (logits - max.unsqueeze(-1)).exp().div_(sum.unsqueeze(-1));
    const at::Tensor here = local_targets >= 0;
    grad.scatter_add_(-1, local_targets.clamp_min(0).unsqueeze(-1),
                      here.to(grad.scalar_type()).neg().unsqueeze(-1));
    grad.mul_(scale.unsqueeze(-1));
    return {grad, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const layers::VocabLogits& logits,
                                        const at::Tensor& targets) {
  return VocabParallelCrossEntropy::apply(logits.logits, targets, logits.vocab_start, logits.group);
}

namespace {

void check_labels(const at::Tensor& labels, int64_t classes) {
  const at::Tensor bad = (labels != kIgnoreIndex) & ((labels < 0) | (labels >= classes));
  if (bad.any().item<bool>()) {
    throw Error(str("label ", labels.masked_select(bad)[0].item<int64_t>(), " is outside [0, ",
                    classes, ") and is not ", kIgnoreIndex));
  }
}

// Mean cross-entropy of rows [rows, classes(/tp)] against targets [rows] in fp32, as HF.
at::Tensor mean_cross_entropy(const layers::VocabLogits& logits, const at::Tensor& rows,
                              const at::Tensor& targets) {
  const at::Tensor counted = (targets != kIgnoreIndex).sum().clamp_min(1);
  const at::Tensor per_row = VocabParallelCrossEntropy::apply(
      rows.to(at::kFloat), targets, logits.parallel ? logits.vocab_start : 0,
      logits.parallel ? logits.group : nullptr);
  return per_row.sum() / counted;
}

}  // namespace

at::Tensor causal_lm_loss(const layers::VocabLogits& logits, const at::Tensor& labels) {
  check_labels(labels, logits.vocab_size);
  const int64_t vocab = logits.logits.size(-1);
  // Position t predicts label t + 1. As HF does, the labels are shifted left and each row's
  // last position is ignored, so the logits are used whole (a view, not a copy).
  const at::Tensor rows = logits.logits.reshape({-1, vocab});  // [batch * seq, vocab(/tp)]
  const at::Tensor targets =                                   // [batch * seq]
      at::cat({labels.narrow(1, 1, labels.size(1) - 1),
               at::full({labels.size(0), 1}, kIgnoreIndex, labels.options())},
              1)
          .reshape({-1});
  return mean_cross_entropy(logits, rows, targets);
}

at::Tensor cross_entropy_loss(const layers::VocabLogits& logits, const at::Tensor& labels) {
  check_labels(labels, logits.vocab_size);
  const int64_t classes = logits.logits.size(-1);
  return mean_cross_entropy(logits, logits.logits.reshape({-1, classes}), labels.reshape({-1}));
}

at::Tensor shift_right(const at::Tensor& labels, int64_t start, int64_t pad) {
  at::Tensor shifted = at::full_like(labels, start);  // [batch, tgt]
  const int64_t tgt = labels.size(1);
  shifted.narrow(1, 1, tgt - 1).copy_(labels.narrow(1, 0, tgt - 1));
  return shifted.masked_fill(shifted == kIgnoreIndex, pad);
}

at::Tensor task_loss(ModelTask task, const layers::VocabLogits& logits, const at::Tensor& labels) {
  switch (task) {
    case ModelTask::kCausalLM: return causal_lm_loss(logits, labels);
    case ModelTask::kMaskedLM:
    case ModelTask::kSeq2SeqLM:
    case ModelTask::kSequenceClassification: return cross_entropy_loss(logits, labels);
    case ModelTask::kBase: break;
  }
  throw Error("a base model has no loss");
}

int64_t counted_labels(ModelTask task, const at::Tensor& labels) {
  if (task != ModelTask::kCausalLM) return (labels != kIgnoreIndex).sum().item<int64_t>();
  if (labels.size(1) < 2) return 0;  // nothing to predict
  return (labels.narrow(1, 1, labels.size(1) - 1) != kIgnoreIndex).sum().item<int64_t>();
}

}  // namespace shardformer

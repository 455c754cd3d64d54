// Causal-LM loss and vocab-parallel cross-entropy (Megatron's formulation).
#include "shardformer/losses.h"

#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

namespace shardformer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  // logits [rows, local_vocab], targets [rows] -> loss [rows]
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, int64_t vocab_start,
                            const distributed::ProcessGroup* group) {
    const int64_t local_vocab = logits.size(-1);
    at::Tensor max = std::get<0>(logits.max(-1)).contiguous();  // [rows]
    group->all_reduce_(max, distributed::ReduceOp::kMax);
    const at::Tensor shifted = logits - max.unsqueeze(-1);  // [rows, local_vocab]
    const at::Tensor exp = shifted.exp();
    at::Tensor sum_exp = exp.sum(-1);  // [rows]
    group->all_reduce_(sum_exp);
    const at::Tensor ignored = targets == kIgnoreIndex;
    const at::Tensor elsewhere =
        ignored | (targets < vocab_start) | (targets >= vocab_start + local_vocab);
    const at::Tensor local_targets = (targets - vocab_start).masked_fill(elsewhere, 0);
    at::Tensor target_logit =  // [rows]: the target's shifted logit, from the rank holding it
        shifted.gather(-1, local_targets.unsqueeze(-1)).squeeze(-1).masked_fill(elsewhere, 0.0);
    group->all_reduce_(target_logit);
    const at::Tensor loss = (sum_exp.log() - target_logit).masked_fill(ignored, 0.0);
    ctx->save_for_backward({exp / sum_exp.unsqueeze(-1), local_targets, elsewhere, ignored});
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor& local_targets = saved[1];
    const at::Tensor& elsewhere = saved[2];
    const at::Tensor& ignored = saved[3];
    at::Tensor grad = softmax.clone();  // d loss / d logits = softmax - one_hot(target)
    grad.scatter_add_(-1, local_targets.unsqueeze(-1),
                      (~elsewhere).to(grad.scalar_type()).neg().unsqueeze(-1));
    grad.mul_((grads[0] * (~ignored).to(grad.scalar_type())).unsqueeze(-1));
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
  const at::Tensor predicted = rows.to(at::kFloat);
  const at::Tensor counted = (targets != kIgnoreIndex).sum().clamp_min(1);
  if (!logits.parallel) {
    return at::cross_entropy_loss(predicted, targets, {}, at::Reduction::Sum, kIgnoreIndex) /
           counted;
  }
  const layers::VocabLogits slice{predicted, true, logits.vocab_start, logits.vocab_size,
                                  logits.group};
  return vocab_parallel_cross_entropy(slice, targets).sum() / counted;
}

}  // namespace

at::Tensor causal_lm_loss(const layers::VocabLogits& logits, const at::Tensor& labels) {
  check_labels(labels, logits.vocab_size);
  const int64_t vocab = logits.logits.size(-1);
  const at::Tensor rows =  // [rows, vocab(/tp)]: position t predicts label t + 1
      logits.logits.narrow(1, 0, logits.logits.size(1) - 1).reshape({-1, vocab});
  const at::Tensor targets = labels.narrow(1, 1, labels.size(1) - 1).reshape({-1});  // [rows]
  return mean_cross_entropy(logits, rows, targets);
}

at::Tensor cross_entropy_loss(const layers::VocabLogits& logits, const at::Tensor& labels) {
  check_labels(labels, logits.vocab_size);
  const int64_t classes = logits.logits.size(-1);
  return mean_cross_entropy(logits, logits.logits.reshape({-1, classes}), labels.reshape({-1}));
}

at::Tensor task_loss(ModelTask task, const layers::VocabLogits& logits, const at::Tensor& labels) {
  switch (task) {
    case ModelTask::kCausalLM: return causal_lm_loss(logits, labels);
    case ModelTask::kMaskedLM:
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

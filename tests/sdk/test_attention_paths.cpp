// layers::attention's inference paths against fp64 softmax attention: no mask, a padding mask
// that pads nothing (both taken by block_attention over every key), right padding
// (block_attention with each batch's key count), left padding and causal padding (SDPA), a plain
// causal mask (block_attention, causal), and masks alternating between calls so that the pattern
// kept for the last mask is never reused for another.
#include "shardformer/layers/attention.h"
#include "shardformer/runtime/inference_scope.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace shardformer::layers {
namespace {

constexpr int64_t kBatch = 2, kHeads = 3, kSeq = 20, kDim = 16;

// softmax(q k^T * scale, masked) v in fp64 -> [batch, seq, heads * dim]
at::Tensor attention_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& mask, double scale) {
  at::Tensor scores = at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) * scale;
  if (mask.defined()) scores = scores.masked_fill(mask.logical_not(), -INFINITY);
  const at::Tensor out = at::matmul(at::softmax(scores, -1), v.to(at::kDouble));
  return out.transpose(1, 2).reshape({kBatch, kSeq, kHeads * kDim});
}

TEST(AttentionPaths, InferencePathsEqualFp64Attention) {
  at::manual_seed(7);
  const runtime::InferenceScope inference;
  const at::NoGradGuard no_grad;
  const at::Tensor q = at::randn({kBatch, kHeads, kSeq, kDim});
  const at::Tensor k = at::randn({kBatch, kHeads, kSeq, kDim});
  const at::Tensor v = at::randn({kBatch, kHeads, kSeq, kDim});
  const double scale = 1.0 / std::sqrt(static_cast<double>(kDim));
  const c10::Device cpu(c10::kCPU);
  const at::Tensor no_padding = at::ones({kBatch, kSeq}, at::kLong);
  at::Tensor padding = no_padding.clone();
  padding[1].narrow(0, kSeq - 5, 5).zero_();  // the second row's last 5 keys are padding
  at::Tensor left_padding = no_padding.clone();
  left_padding[0].narrow(0, 0, 3).zero_();  // the first row's first 3 keys are padding
  const at::Tensor all_visible =
      attention_mask({.causal = false}, no_padding, kBatch, kSeq, 0, cpu);
  const at::Tensor padded = attention_mask({.causal = false}, padding, kBatch, kSeq, 0, cpu);
  const at::Tensor causal = attention_mask({.causal = true}, no_padding, kBatch, kSeq, 0, cpu);
  const at::Tensor left = attention_mask({.causal = false}, left_padding, kBatch, kSeq, 0, cpu);
  const at::Tensor causal_padded = attention_mask({.causal = true}, padding, kBatch, kSeq, 0, cpu);
  ASSERT_TRUE(all_visible.defined() && padded.defined() && causal.defined() && left.defined() &&
              causal_padded.defined());
  const auto check = [&](const at::Tensor& mask, const char* what) {
    const at::Tensor got = attention(q, k, v, {.mask = mask, .scale = scale});
    const at::Tensor want = attention_reference(q, k, v, mask, scale);
    EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 1e-5) << what;
  };
  for (int round = 0; round < 2; ++round) {
    check({}, "no mask");
    check(all_visible, "a padding mask that pads nothing");
    check(padded, "a padding mask that pads");
    check(all_visible, "the first mask again");
    check(causal, "the causal mask");
    check(padded, "the padding mask after the causal one");
    check(left, "left padding");
    check(causal_padded, "a causal mask with right padding");
    check(padded, "right padding after left padding");
  }
}

}  // namespace
}  // namespace shardformer::layers

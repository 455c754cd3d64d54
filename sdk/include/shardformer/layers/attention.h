// The attention every family shares once its projections are done: masks (causal,
// bidirectional, padding, sliding window), ALiBi biases, grouped-query heads, the KV cache,
// scaling, attention-probability dropout, and LibTorch's SDPA where it applies.
#pragma once

#include "shardformer/kv_cache.h"
#include "shardformer/parallel/sequence_split.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

namespace shardformer::layers {

class Dropout;

// Which keys a query sees (besides padding).
struct MaskOptions {
  bool causal = true;          // false: every key (bidirectional encoders such as BERT)
  int64_t sliding_window = 0;  // > 0: a query at i sees keys i - window + 1 .. i (Mistral)
};

// The boolean mask [batch, 1, q_len, past + q_len] (true = attend) of `options` and the
// padding mask `padding` [batch, past + q_len] of 0/1 (undefined: no padding), indexed by
// cache slot; undefined when nothing is masked (one causal query without padding or window,
// or a bidirectional one without padding).
at::Tensor attention_mask(const MaskOptions& options, const at::Tensor& padding, int64_t batch,
                          int64_t q_len, int64_t past, c10::Device device);

// ALiBi (BLOOM): the slopes of `num_heads` heads [num_heads] (a power of two p <= heads gives
// 2^(-8i/p); the remaining heads interleave the slopes of 2p), and the bias of heads
// [first, first + count) [batch, count, 1, kv_len]: slope x the key's position among its row's
// real tokens (padding: 0), in `dtype`. By softmax's shift invariance this is -slope x distance.
at::Tensor alibi_slopes(int64_t num_heads);
at::Tensor alibi_bias(const at::Tensor& slopes, int64_t first, int64_t count,
                      const at::Tensor& padding, c10::ScalarType dtype);

// What one attention call needs besides queries, keys and values.
struct AttentionArgs {
  at::Tensor mask{};  // from attention_mask(); undefined: attend to every key, or:
  // With no mask and as many queries as keys: query i sees keys 0..i (ForwardStep::causal), as
  // SDPA's is_causal, without a [q_len, kv_len] mask tensor.
  bool causal = false;
  at::Tensor bias{};           // additive [batch, heads, q_len or 1, kv_len] (ALiBi), or none
  double scale = 1.0;          // applied to q . k
  Dropout* dropout = nullptr;  // on the probabilities when active (training, p > 0)
  KVCache* cache = nullptr;    // this step's keys / values are appended to layer `layer`
  int64_t layer = 0;
  bool upcast = false;  // fp16 / bf16 inputs attend in fp32 (GPT-2's reorder_and_upcast_attn)
  // The sequence split of this forward pass (null: none). q, k and v hold this rank's tokens
  // under all_to_all (exchanged for a share of the heads around attention) and ring_attn; the
  // whole sequence under split_gather.
  const SequenceSplit* sequence = nullptr;
};

// q [batch, heads, q_len, head_dim]; k, v [batch, kv_heads, q_len, head_dim] (this step's; the
// cache adds the past), heads a multiple of kv_heads: query head h reads key/value head
// h / (heads / kv_heads). Returns [batch, q_len, heads * head_dim]. Rows whose keys are all
// masked (left padding) give zeros; with a bias such rows average every key, as HF's eager
// attention does. Under sequence parallelism (args.sequence) q_len is this rank's tokens.
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionArgs& args);

// [batch, seq, heads * head_dim] -> [batch, heads, seq, head_dim]
at::Tensor split_heads(const at::Tensor& x, int64_t heads, int64_t head_dim);

}  // namespace shardformer::layers

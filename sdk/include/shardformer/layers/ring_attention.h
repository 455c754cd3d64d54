// Ring attention over the sequence group: each rank keeps its queries (zig-zag chunks, so that
// causal work is balanced), the keys and values travel round the ring, and the blocks are
// merged with an online softmax; backward sends the key / value gradients round with them.
#pragma once

#include "shardformer/parallel/sequence_split.h"

#include <ATen/Tensor.h>

namespace shardformer::layers {

// q [batch, heads, local, head_dim]; k, v [batch, kv_heads, local, head_dim], this rank's
// tokens of `split` (ring_attn mode). Causal by token position, padded keys masked. Returns
// [batch, heads, local, head_dim]; a query that sees no key gets zeros.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          double scale, const SequenceSplit& split);

}  // namespace shardformer::layers

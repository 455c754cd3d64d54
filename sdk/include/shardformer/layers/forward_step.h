// What a transformer's forward pass works out once before its layers: the past length from the
// KV cache, the positions, the attention mask, the sequence-parallel split and, under a
// pipeline, where the input comes from.
#pragma once

#include "shardformer/layers/attention.h"
#include "shardformer/model.h"
#include "shardformer/parallel/sequence_split.h"

#include <memory>

namespace shardformer::layers {

struct ForwardStep {
  int64_t past = 0;        // tokens already cached for the chunk's first layer
  at::Tensor positions{};  // [batch, seq]: inputs.position_ids, or past + arange(seq)
  // What attention compares queries and keys with: from attention_mask(options,
  // inputs.attention_mask, ...), over the padded sequence when it is split (undefined under
  // ring attention, which masks by position).
  at::Tensor mask{};
  // The mask is plain causal (a causal model, no padding, no past, no window) and left
  // undefined: attention uses SDPA's is_causal instead of a [seq, seq] tensor (256 MiB at 16k
  // tokens, kept for the whole forward).
  bool causal = false;
  // null: every rank holds the whole sequence.
  std::shared_ptr<const SequenceSplit> sequence{};

  // The hidden states after the embeddings [batch, seq, hidden] -> this rank's tokens.
  at::Tensor split(const at::Tensor& x) const { return sequence ? sequence->scatter(x) : x; }
  // This rank's tokens after the last layer -> the whole sequence [batch, seq, hidden].
  at::Tensor join(const at::Tensor& x) const { return sequence ? sequence->gather(x) : x; }
  // A per-token tensor [batch, seq, ...] that every rank computes whole (rotary tables) as the
  // layers' queries and keys see it: padded under split_gather (they attend over the whole
  // sequence), this rank's tokens under all_to_all and ring_attn.
  at::Tensor for_layers(const at::Tensor& t) const;
};

// Throws ModelError when the sequence is split and the step cannot be (a KV cache: generation
// runs without sequence parallelism; a bidirectional mask; ring attention with a sliding window).
ForwardStep forward_step(const ForwardInputs& inputs, int64_t first_layer,
                         const MaskOptions& options, const SequenceParallelism& sp = {});

// Which keys of this step are real tokens, [batch, past + seq] of 0/1: inputs.attention_mask, or
// all ones without one (ALiBi's positions count them).
at::Tensor key_padding(const ForwardInputs& inputs, const ForwardStep& step, int64_t batch,
                       int64_t seq);

// The positions an LM head needs: hidden [batch, seq, hidden] narrowed to its last
// inputs.logits_to_keep positions (contiguous), or all of them when that is 0 or covers them.
at::Tensor kept_positions(const at::Tensor& hidden, const ForwardInputs& inputs);

// The hidden states a chunk that does not start the model receives from the previous stage
// [batch, seq, hidden] (this rank's tokens when the sequence is split); throws Error when
// there are none.
const at::Tensor& stage_input(const ForwardInputs& inputs);

}  // namespace shardformer::layers

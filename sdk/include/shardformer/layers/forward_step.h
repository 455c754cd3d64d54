// What a transformer's forward pass works out once before its layers: the past length from the
// KV cache, the positions, the attention mask and, under a pipeline, where the input comes from.
#pragma once

#include "shardformer/layers/attention.h"
#include "shardformer/model.h"

namespace shardformer::layers {

struct ForwardStep {
  int64_t past = 0;        // tokens already cached for the chunk's first layer
  at::Tensor positions{};  // [batch, seq]: inputs.position_ids, or past + arange(seq)
  at::Tensor mask{};       // attention_mask(options, inputs.attention_mask, ...)
};

ForwardStep forward_step(const ForwardInputs& inputs, int64_t first_layer,
                         const MaskOptions& options);

// The hidden states a chunk that does not start the model receives from the previous stage
// [batch, seq, hidden]; throws Error when there are none.
const at::Tensor& stage_input(const ForwardInputs& inputs);

}  // namespace shardformer::layers

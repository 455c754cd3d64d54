// Past length, positions and mask of one forward pass.
#include "shardformer/layers/forward_step.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

ForwardStep forward_step(const ForwardInputs& inputs, int64_t first_layer,
                         const MaskOptions& options) {
  const at::Tensor& ids = inputs.input_ids;  // [batch, seq]
  const int64_t batch = ids.size(0), seq = ids.size(1);
  ForwardStep step;
  step.past = inputs.cache != nullptr ? inputs.cache->length(first_layer) : 0;
  step.positions =
      inputs.position_ids.defined()
          ? inputs.position_ids
          : at::arange(step.past, step.past + seq, ids.options()).unsqueeze(0).expand({batch, seq});
  step.mask = attention_mask(options, inputs.attention_mask, batch, seq, step.past, ids.device());
  return step;
}

const at::Tensor& stage_input(const ForwardInputs& inputs) {
  if (!inputs.hidden_states.defined()) {
    throw Error(str("pipeline: chunk ", inputs.chunk,
                    " does not start the model but received no hidden states"));
  }
  return inputs.hidden_states;
}

}  // namespace shardformer::layers

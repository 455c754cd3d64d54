// Past length, positions, mask and sequence split of one forward pass.
#include "shardformer/layers/forward_step.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

at::Tensor ForwardStep::for_layers(const at::Tensor& t) const {
  if (!sequence) return t;
  return sequence->mode() == SequenceParallelMode::kSplitGather ? sequence->pad(t)
                                                                : sequence->local(t);
}

namespace {

// Whether attention over `seq` new tokens (no past) with this padding is plain causal.
bool plain_causal_step(const MaskOptions& options, const at::Tensor& padding, int64_t past,
                       int64_t seq) {
  return options.causal && options.sliding_window <= 0 && !padding.defined() && past == 0 &&
         seq > 1;
}

}  // namespace

ForwardStep forward_step(const ForwardInputs& inputs, int64_t first_layer,
                         const MaskOptions& options, const SequenceParallelism& sp) {
  const at::Tensor& ids = inputs.input_ids;  // [batch, seq]
  const int64_t batch = ids.size(0), seq = ids.size(1);
  ForwardStep step;
  step.past = inputs.cache != nullptr ? inputs.cache->length(first_layer) : 0;
  step.positions =
      inputs.position_ids.defined()
          ? inputs.position_ids
          : at::arange(step.past, step.past + seq, ids.options()).unsqueeze(0).expand({batch, seq});
  if (!sp.active()) {
    step.causal = plain_causal_step(options, inputs.attention_mask, step.past, seq);
    if (!step.causal) {
      step.mask =
          attention_mask(options, inputs.attention_mask, batch, seq, step.past, ids.device());
    }
    return step;
  }
  const char* mode = sequence_mode_name(sp.mode);
  if (inputs.cache != nullptr) {
    throw ModelError(str("sequence parallelism (", mode, ") runs forward passes and training; ",
                         "generation with a KV cache needs shard.enable_sequence_parallelism = "
                         "false"));
  }
  if (!options.causal) {
    throw ModelError(str("sequence parallelism (", mode, ") needs a causal model"));
  }
  if (sp.mode == SequenceParallelMode::kRingAttn && options.sliding_window > 0) {
    throw ModelError("ring attention does not support sliding-window attention layers");
  }
  step.sequence = std::make_shared<SequenceSplit>(sp, batch, seq, inputs.attention_mask);
  if (sp.mode != SequenceParallelMode::kRingAttn) {
    const int64_t padded = step.sequence->padded_length();
    step.causal = plain_causal_step(options, step.sequence->padding(), 0, padded);
    if (!step.causal) {
      step.mask = attention_mask(options, step.sequence->padding(), batch, padded, 0, ids.device());
    }
  }
  return step;
}

at::Tensor key_padding(const ForwardInputs& inputs, const ForwardStep& step, int64_t batch,
                       int64_t seq) {
  if (inputs.attention_mask.defined()) return inputs.attention_mask;
  return at::ones({batch, step.past + seq}, inputs.input_ids.options());
}

at::Tensor kept_positions(const at::Tensor& hidden, const ForwardInputs& inputs) {
  const int64_t seq = hidden.size(1), keep = inputs.logits_to_keep;
  if (keep <= 0 || keep >= seq) return hidden;
  return hidden.narrow(1, seq - keep, keep).contiguous();  // [batch, keep, hidden]
}

const at::Tensor& stage_input(const ForwardInputs& inputs) {
  if (!inputs.hidden_states.defined()) {
    throw Error(str("pipeline: chunk ", inputs.chunk,
                    " does not start the model but received no hidden states"));
  }
  return inputs.hidden_states;
}

}  // namespace shardformer::layers

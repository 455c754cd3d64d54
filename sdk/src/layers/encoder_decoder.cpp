// An encoder-decoder model's pass through one pipeline stage's part of its two stacks.
#include "shardformer/layers/encoder_decoder.h"

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/layers/cross_attention.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

std::vector<at::Tensor> EncoderDecoderStep::differentiable_inputs() const {
  std::vector<at::Tensor> inputs;
  for (const at::Tensor* t : {&self.bias, &memory}) {
    if (t->defined() && t->requires_grad()) inputs.push_back(*t);
  }
  return inputs;
}

EncoderDecoderStep EncoderDecoderStep::with_inputs(const std::vector<at::Tensor>& inputs) const {
  EncoderDecoderStep step = *this;
  size_t next = 0;
  for (at::Tensor* t : {&step.self.bias, &step.memory}) {
    if (t->defined() && t->requires_grad()) *t = inputs.at(next++);
  }
  return step;
}

EncoderDecoderStage::EncoderDecoderStage(const BuildContext& ctx,
                                         const EncoderDecoderOptions& options)
    : encoder_layers_(options.encoder_layers),
      decoder_layers_(options.decoder_layers),
      memory_padding_(options.memory_padding),
      pipelined_(ctx.pipeline() != nullptr) {
  const std::vector<LayerRange> ranges = ctx.layer_ranges(total());
  if (ranges.size() != 1) {
    throw ModelError(str(ctx.config().path().string(),
                         ": an encoder-decoder model does not run under the interleaved schedule "
                         "(several model chunks per stage); use 1F1B or GPipe"));
  }
  range_ = ranges.front();
}

bool EncoderDecoderStage::encoding(const ForwardInputs& inputs) {
  return inputs.input_ids.defined() || inputs.input_features.defined();
}

at::Tensor EncoderDecoderStage::run(const ForwardInputs& inputs, const Stacks& stacks) const {
  if (!inputs.decoder_input_ids.defined()) {
    throw Error("an encoder-decoder model needs decoder_input_ids (or labels, shifted into them)");
  }
  const bool encode = encoding(inputs);
  const int64_t tgt = inputs.decoder_input_ids.size(1);
  at::Tensor memory, x;  // the encoder's output [b, src, h]; the decoder's hidden [b, tgt, h]
  if (encode && holds_encoder()) {
    at::Tensor h = starts_encoder() ? stacks.encoder_input() : stage_input(inputs);
    h = stacks.encoder(h);
    if (!ends_encoder()) return h;  // [batch, src, hidden] to the next stage
    memory = stacks.encoder_output(h);
    if (!holds_decoder()) return memory;
  } else if (!holds_decoder()) {
    throw Error("a decoding step reached a stage that holds no decoder layer");
  } else if (!starts_decoder()) {
    const at::Tensor& in = stage_input(inputs);  // [batch, tgt (+ src), hidden]
    x = in.narrow(1, 0, tgt);
    if (encode) memory = in.narrow(1, tgt, in.size(1) - tgt);
  } else if (encode) {
    memory = stage_input(inputs);  // the encoder's output, from the stage that ended it
  }
  if (starts_decoder()) x = stacks.decoder_input();
  EncoderDecoderStep step;
  step.self.cache = inputs.cache;
  step.memory = memory;
  if (memory_padding_) step.memory_mask = memory_mask(inputs.attention_mask);
  step.cross_cache = inputs.cross_cache;
  x = stacks.decoder(x, step);
  if (ends_decoder()) return kept_positions(stacks.decoder_output(x), inputs);
  return encode ? at::cat({x, memory}, 1) : x;  // [batch, tgt (+ src), hidden]
}

bool EncoderDecoderStage::runs_step(const ForwardInputs& inputs) const {
  return encoding(inputs) || holds_decoder();
}

bool EncoderDecoderStage::starts_step(const ForwardInputs& inputs) const {
  return encoding(inputs) ? starts_encoder() : starts_decoder();
}

}  // namespace shardformer::layers

// The two stacks of an encoder-decoder model on one pipeline stage: which layers of each the
// stage holds, and how a pass moves through them and between stages. The stages split the
// encoder's layers and then the decoder's as one list; a stage before the encoder's end sends
// the encoder's hidden states, the one ending it the encoder's output, and every decoder stage
// the decoder's hidden states with the encoder's output packed behind them on the sequence axis
// ([batch, tgt + src, hidden]), so cross-attention has it on every stage and autograd sums its
// gradient. Without a pipeline the one stage holds everything.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/kv_cache.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/self_attention.h"
#include "shardformer/model.h"

#include <ATen/Tensor.h>

#include <functional>
#include <vector>

namespace shardformer::layers {

// What a layer of either stack gets besides its input: its self-attention's step (mask, position
// bias, cache) and, in the decoder, the encoder's output with its padding mask and the
// cross-attention cache.
struct EncoderDecoderStep {
  AttentionStep self;
  at::Tensor memory{};       // the decoder's: the encoder's output [batch, src, hidden]
  at::Tensor memory_mask{};  // [batch, 1, 1, src] (memory_mask()), or undefined: no padding
  KVCache* cross_cache = nullptr;

  // The position bias and the memory where they carry gradients: a recomputed layer passes them
  // through recompute_in_backward (HasDifferentiableInputs), which returns their gradients.
  std::vector<at::Tensor> differentiable_inputs() const;
  // This step with differentiable_inputs() replaced by `inputs`, in the same order.
  EncoderDecoderStep with_inputs(const std::vector<at::Tensor>& inputs) const;
};

// What the stage needs to know of the model.
struct EncoderDecoderOptions {
  int64_t encoder_layers = 0, decoder_layers = 0;
  // Whether the encoder's attention_mask (its input's padding) masks cross-attention (T5's);
  // false where the encoder's output has no padding (Whisper's 30 s of audio).
  bool memory_padding = true;
};

class EncoderDecoderStage {
 public:
  // ctx: the model's root context (its pipeline stage, if any). Throws ModelError under the
  // interleaved schedule (several chunks per stage).
  EncoderDecoderStage(const BuildContext& ctx, const EncoderDecoderOptions& options);

  // Where each stack's layers sit among the pipeline's (LayerStack's span).
  StackSpan encoder_span() const { return {0, pipelined_ ? total() : 0}; }
  StackSpan decoder_span() const { return {encoder_layers_, pipelined_ ? total() : 0}; }
  bool holds_encoder() const { return range_.begin < encoder_layers_; }
  bool holds_decoder() const { return range_.end > encoder_layers_; }
  bool starts_encoder() const { return range_.begin == 0; }
  bool ends_encoder() const { return holds_encoder() && range_.end >= encoder_layers_; }
  bool starts_decoder() const { return holds_decoder() && range_.begin <= encoder_layers_; }
  bool ends_decoder() const { return range_.end == total(); }

  // What a model's stacks do on this stage (each called only where the stage holds that part).
  struct Stacks {
    std::function<at::Tensor()> encoder_input;  // the encoder's embeddings [batch, src, hidden]
    std::function<at::Tensor(const at::Tensor&)> encoder;         // this stage's encoder layers
    std::function<at::Tensor(const at::Tensor&)> encoder_output;  // the encoder's final norm
    std::function<at::Tensor()> decoder_input;  // the decoder's embeddings [batch, tgt, hidden]
    // x [batch, tgt, hidden] through this stage's decoder layers; step: the self-attention
    // cache, and the memory [batch, src, hidden] (undefined at decoding steps that read the
    // cross-attention cache) with its mask and cache.
    std::function<at::Tensor(const at::Tensor& x, const EncoderDecoderStep& step)> decoder;
    std::function<at::Tensor(const at::Tensor&)> decoder_output;  // the decoder's final norm
  };
  // This stage's part of a pass: what it sends on, or, where it ends the decoder, the decoder's
  // output after its final norm at the positions the head reads [batch, tgt or keep, hidden].
  at::Tensor run(const ForwardInputs& inputs, const Stacks& stacks) const;
  // Whether a pass runs the encoder: it has the encoder's input (token ids, audio features);
  // decoding steps after the first have not.
  static bool encoding(const ForwardInputs& inputs);
  // Model::runs_step / starts_step: decoding steps after the first skip the encoder's stages.
  bool runs_step(const ForwardInputs& inputs) const;
  bool starts_step(const ForwardInputs& inputs) const;

 private:
  int64_t total() const { return encoder_layers_ + decoder_layers_; }

  int64_t encoder_layers_, decoder_layers_;
  bool memory_padding_, pipelined_;
  LayerRange range_;  // this stage's layers among the encoder's and then the decoder's
};

}  // namespace shardformer::layers

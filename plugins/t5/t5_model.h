// T5 (HF T5ForConditionalGeneration, T5EncoderModel) with SDK blocks: pre-norm blocks of
// self-attention (no q.k scaling; the first block's bucketed relative position bias shared by
// the rest), cross-attention in the decoder, and a ReLU or gated-GELU feed-forward; T5's RMS
// norm; one embedding "shared" by both stacks and the head. Shapes are per rank.
#pragma once

#include "t5_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/pre_norm_block.h"
#include "shardformer/layers/relative_position_bias.h"
#include "shardformer/layers/rms_norm.h"
#include "shardformer/model.h"
#include "shardformer/seq2seq_lm.h"

#include <memory>

namespace shardformer::t5 {

// What every block of one stack shares in a forward pass.
using T5Step = layers::EncoderDecoderStep;

// One block: layer.0 self-attention, layer.1 cross-attention (decoder), then the feed-forward.
class T5Block : public torch::nn::Module {
 public:
  T5Block(const BuildContext& ctx, const T5Config& config, bool decoder, int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const T5Step& step);  // [b, s, d_model] -> same

 private:
  // RMSNorms; the feed-forward an MLP (ReLU, v1.0) or a GatedMLP (gated GELU, v1.1).
  layers::PreNormSublayers sublayers_;
  bool half_;  // fp16: HF's T5 in fp16 (wo in fp32, clamped sums), not the fused block
};

// This stage's part of the encoder or the decoder ("encoder" / "decoder"): the embedding's
// dropout where it starts the stack, its blocks, the final norm where it ends it, and the
// relative position bias table of block 0, which every stage running the stack holds (its
// gradient summed over them, as the policy's shared parameter).
class T5Stack : public torch::nn::Module {
 public:
  // shared: the embedding (null where this stage does not start the stack); span: where the
  // stack's layers sit among the pipeline's (the decoder's after the encoder's).
  T5Stack(const BuildContext& ctx, const T5Config& config, bool decoder,
          std::shared_ptr<layers::Embedding> shared, layers::StackSpan span);
  bool ends() const { return range_.end == count_; }  // holds the last block
  // ids [batch, len] embedded, or embeds (HF's inputs_embeds) where defined; then the dropout.
  // -> [batch, len, d_model]
  at::Tensor embed(const at::Tensor& ids, const at::Tensor& embeds = {}) const;
  // x through this stage's blocks; padding [batch, past + len] or undefined; the decoder also
  // reads memory, memory_mask and the caches. -> [batch, len, d_model]
  at::Tensor run(const at::Tensor& x, const at::Tensor& padding, const T5Step& context) const;
  at::Tensor finish(const at::Tensor& x) const;  // the final norm and dropout

 private:
  bool decoder_;
  int64_t count_;
  LayerRange range_;  // this stage's blocks, in the stack's indices
  std::shared_ptr<layers::Embedding> shared_;
  std::shared_ptr<layers::Dropout> dropout_;
  layers::LayerStack<T5Block> blocks_;
  std::shared_ptr<layers::RelativePositionBias> bias_;
  std::shared_ptr<layers::RMSNorm> final_layer_norm_;
};

// T5ForConditionalGeneration: the encoder, the decoder and the LM head (tied to "shared" unless
// the checkpoint holds lm_head.weight, as HF unties it then). Under a pipeline the stages split
// the encoder's blocks and then the decoder's (layers::EncoderDecoderStage). The encoder reads
// ForwardInputs::inputs_embeds instead of embedding input_ids where they are given (BLIP-2's).
class T5ForConditionalGeneration : public Seq2SeqLM {
 public:
  T5ForConditionalGeneration(const BuildContext& ctx, const T5Config& config);
  ModelShape shape() const override;
  // The embedding both stacks share (null where this stage starts neither nor holds the head).
  const std::shared_ptr<layers::Embedding>& shared() const { return shared_; }

 protected:
  // This stage's part of the pass: what it sends on, or, on the last stage, the decoder's
  // output scaled for the head [batch, tgt or keep, d_model].
  at::Tensor decoder_output(const ForwardInputs& inputs) override;

 private:
  T5Config config_;
  int64_t heads_;  // this rank's
  layers::EncoderDecoderStage stage_;
  std::shared_ptr<layers::Embedding> shared_;
  std::shared_ptr<T5Stack> encoder_, decoder_;  // null where this stage holds none of it
};

// T5EncoderModel: the shared embedding and the encoder; its output is the last hidden state.
class T5EncoderModel : public Model {
 public:
  T5EncoderModel(const BuildContext& ctx, const T5Config& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, src, d_model]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }

 private:
  T5Config config_;
  int64_t heads_;
  std::shared_ptr<layers::Embedding> shared_;
  std::shared_ptr<T5Stack> encoder_;
};

}  // namespace shardformer::t5

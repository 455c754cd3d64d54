// Whisper (HF WhisperModel, WhisperForConditionalGeneration) with SDK blocks: the audio
// encoder's two convolutions with GELU and sinusoidal positions, pre-LN layers whose queries are
// scaled before q . k and whose k_proj has no bias, the decoder's learned positions and
// cross-attention, proj_out tied to the decoder's embedding. Shapes are per rank.
#pragma once

#include "whisper_config.h"

#include "shardformer/build_context.h"
#include "shardformer/layers/conv.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/mlp.h"
#include "shardformer/layers/pre_norm_block.h"
#include "shardformer/model.h"
#include "shardformer/seq2seq_lm.h"

#include <memory>

namespace shardformer::whisper {

// What every layer of one stack shares in a forward pass.
using WhisperStep = layers::EncoderDecoderStep;  // the memory has no padding mask

// An encoder layer (self-attention, MLP) or a decoder layer (self-attention, encoder_attn, MLP).
class WhisperLayer : public torch::nn::Module {
 public:
  WhisperLayer(const BuildContext& ctx, const WhisperConfig& config, bool decoder,
               int64_t layer_idx);
  at::Tensor forward(const at::Tensor& x, const WhisperStep& step);  // [b, s, d_model] -> same

 private:
  layers::PreNormSublayers sublayers_;  // LayerNorms, encoder_attn in a decoder
  std::shared_ptr<layers::MLP> mlp_;    // fc1, fc2 (registered on the layer itself)
};

// This stage's part of the encoder: the convolutions and positions where it starts, its layers,
// the final layer_norm where it ends.
class WhisperEncoder : public torch::nn::Module {
 public:
  WhisperEncoder(const BuildContext& ctx, const WhisperConfig& config,
                 const layers::EncoderDecoderStage& stage);
  // input_features [batch, mels, 2 max_source_positions] -> [batch, max_source_positions, d]
  at::Tensor embed(const at::Tensor& input_features) const;
  at::Tensor run(const at::Tensor& x) const;     // this stage's layers
  at::Tensor finish(const at::Tensor& x) const;  // layer_norm

 private:
  WhisperConfig config_;
  std::shared_ptr<layers::Conv> conv1_, conv2_;  // kernel 3, strides 1 and 2
  at::Tensor positions_;                         // [max_source_positions, d_model]: sinusoids
  std::shared_ptr<layers::Dropout> dropout_;
  layers::LayerStack<WhisperLayer> layers_;
  std::shared_ptr<layers::LayerNorm> layer_norm_;
};

// This stage's part of the decoder: token and position embeddings where it starts (the token
// embedding on the last stage too, for the tied head), its layers, layer_norm where it ends.
class WhisperDecoder : public torch::nn::Module {
 public:
  WhisperDecoder(const BuildContext& ctx, const WhisperConfig& config,
                 const layers::EncoderDecoderStage& stage, bool embedding_on_last_stage);
  // ids [batch, len] after `past` cached tokens -> [batch, len, d_model]
  at::Tensor embed(const at::Tensor& ids, int64_t past) const;
  // x through this stage's layers; padding [batch, past + len] or undefined.
  at::Tensor run(const at::Tensor& x, const at::Tensor& padding, const WhisperStep& context) const;
  at::Tensor finish(const at::Tensor& x) const;  // layer_norm
  int64_t first_layer() const { return layers_.first_layer(0); }
  const std::shared_ptr<layers::Embedding>& embed_tokens() const { return embed_tokens_; }

 private:
  WhisperConfig config_;
  std::shared_ptr<layers::Embedding> embed_tokens_, embed_positions_;
  std::shared_ptr<layers::Dropout> dropout_;
  layers::LayerStack<WhisperLayer> layers_;
  std::shared_ptr<layers::LayerNorm> layer_norm_;
};

// HF WhisperModel: its output is the decoder's last hidden state. Under a pipeline the stages
// split the encoder's layers and then the decoder's (layers::EncoderDecoderStage).
class WhisperModel : public Model {
 public:
  WhisperModel(const BuildContext& ctx, const WhisperConfig& config, bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, tgt or keep, d_model]
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  bool runs_step(const ForwardInputs& inputs, int64_t) const override {
    return stage_.runs_step(inputs);
  }
  bool starts_step(const ForwardInputs& inputs, int64_t) const override {
    return stage_.starts_step(inputs);
  }
  const std::shared_ptr<layers::Embedding>& embed_tokens() const {
    return decoder_->embed_tokens();
  }
  const layers::EncoderDecoderStage& stage() const { return stage_; }

 private:
  WhisperConfig config_;
  int64_t heads_;  // the decoder's, this rank's
  layers::EncoderDecoderStage stage_;
  std::shared_ptr<WhisperEncoder> encoder_;  // null where this stage holds none of it
  std::shared_ptr<WhisperDecoder> decoder_;
};

// WhisperForConditionalGeneration: WhisperModel under "model" and proj_out, the decoder's
// embedding reused (vocab-parallel with it).
class WhisperForConditionalGeneration : public Seq2SeqLM {
 public:
  WhisperForConditionalGeneration(const BuildContext& ctx, const WhisperConfig& config);
  ModelShape shape() const override { return model_->shape(); }

 protected:
  at::Tensor decoder_output(const ForwardInputs& inputs) override {
    return model_->forward(inputs);
  }

 private:
  std::shared_ptr<WhisperModel> model_;
};

}  // namespace shardformer::whisper

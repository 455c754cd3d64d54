// Whisper's layers, stacks and heads, as in HF's modeling_whisper.py.
#include "whisper_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::whisper {

namespace {

constexpr double kLayerNormEps = 1e-5;  // torch.nn.LayerNorm's default, which HF keeps

std::shared_ptr<layers::LayerNorm> layer_norm(torch::nn::Module& parent, const BuildContext& ctx,
                                              const char* name, int64_t dim) {
  return parent.register_module(
      name, std::make_shared<layers::LayerNorm>(ctx.child(name), dim, kLayerNormEps));
}

}  // namespace

WhisperLayer::WhisperLayer(const BuildContext& ctx, const WhisperConfig& c, bool decoder,
                           int64_t layer_idx) {
  const int64_t heads = decoder ? c.decoder_attention_heads : c.encoder_attention_heads;
  const int64_t head_dim = c.d_model / heads;
  sublayers_.self_norm = layer_norm(*this, ctx, "self_attn_layer_norm", c.d_model).get();
  sublayers_.self_attn =
      register_module("self_attn", std::make_shared<layers::SelfAttention>(
                                       ctx.child("self_attn"),
                                       layers::SelfAttentionOptions{.hidden_size = c.d_model,
                                                                    .num_heads = heads,
                                                                    .num_kv_heads = heads,
                                                                    .head_dim = head_dim,
                                                                    .qkv_bias = true,
                                                                    .out_bias = true,
                                                                    .key_bias = false,
                                                                    .scale_queries = true,
                                                                    .dropout = c.attention_dropout,
                                                                    .out_name = "out_proj"},
                                       layer_idx))
          .get();
  if (decoder) {
    sublayers_.cross_norm = layer_norm(*this, ctx, "encoder_attn_layer_norm", c.d_model).get();
    sublayers_.cross_attn =
        register_module("encoder_attn",
                        std::make_shared<layers::CrossAttention>(
                            ctx.child("encoder_attn"),
                            layers::CrossAttentionOptions{.hidden_size = c.d_model,
                                                          .num_heads = heads,
                                                          .head_dim = head_dim,
                                                          .q_bias = true,
                                                          .k_bias = false,
                                                          .v_bias = true,
                                                          .out_bias = true,
                                                          .scale_queries = true,
                                                          .dropout = c.attention_dropout},
                            layer_idx))
            .get();
  }
  sublayers_.ff_norm = layer_norm(*this, ctx, "final_layer_norm", c.d_model).get();
  // fc1 / fc2 sit in the layer itself: the MLP registers them here.
  mlp_ = std::make_shared<layers::MLP>(
      ctx, layers::MLPOptions{.hidden_size = c.d_model,
                              .intermediate_size = decoder ? c.decoder_ffn_dim : c.encoder_ffn_dim,
                              .activation = c.activation_function,
                              .bias = true,
                              .in_name = "fc1",
                              .out_name = "fc2",
                              .inner_dropout = c.activation_dropout,
                              .dropout_name = "activation_dropout",
                              .owner = this});
  sublayers_.mlp = mlp_.get();
  // One dropout module after every sublayer, as in HF.
  layers::Dropout* dropout =
      register_module("dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.dropout))
          .get();
  sublayers_.self_dropout = sublayers_.cross_dropout = sublayers_.ff_dropout = dropout;
}

at::Tensor WhisperLayer::forward(const at::Tensor& x, const WhisperStep& step) {
  return layers::pre_norm_block(sublayers_, x, step);
}

WhisperEncoder::WhisperEncoder(const BuildContext& ctx, const WhisperConfig& c,
                               const layers::EncoderDecoderStage& stage)
    : config_(c) {
  if (stage.starts_encoder()) {
    const auto conv = [&](const char* name, int64_t in, int64_t stride) {
      return register_module(
          name,
          std::make_shared<layers::Conv>(
              ctx.child(name),
              layers::ConvOptions{
                  .in = in, .out = c.d_model, .kernel = {3}, .stride = stride, .padding = 1}));
    };
    conv1_ = conv("conv1", c.num_mel_bins, 1);
    conv2_ = conv("conv2", c.d_model, 2);
    // HF's modelling file marks the sinusoids requires_grad false, but a model from_pretrained
    // loads trains them (transformers 5.23): a parameter, as there.
    auto positions = register_module("embed_positions", std::make_shared<torch::nn::Module>());
    positions_ = positions->register_parameter(
        "weight", ctx.child("embed_positions").load("weight", {c.max_source_positions, c.d_model}));
  }
  dropout_ = register_module("dropout",
                             std::make_shared<layers::Dropout>(ctx.child("dropout"), c.dropout));
  layers_ = layers::LayerStack<WhisperLayer>(
      *this, ctx, "layers", c.encoder_layers,
      [&](const auto& layer, int64_t i) {
        return std::make_shared<WhisperLayer>(layer, c, false, i);
      },
      stage.encoder_span());
  if (stage.ends_encoder()) layer_norm_ = layer_norm(*this, ctx, "layer_norm", c.d_model);
}

at::Tensor WhisperEncoder::embed(const at::Tensor& input_features) const {
  const int64_t frames = 2 * config_.max_source_positions;
  if (!input_features.defined()) {
    throw Error(
        "Whisper reads log-mel input_features [batch, mels, frames], not token ids: audio comes "
        "through the transcribe job or generate_from_features (training on speech is not "
        "supported yet)");
  }
  if (input_features.dim() != 3 || input_features.size(1) != config_.num_mel_bins ||
      input_features.size(2) != frames) {
    throw Error(str("Whisper: input_features must be [batch, ", config_.num_mel_bins, ", ", frames,
                    "] (mel bins, 30 s of frames), not ", shape_str(input_features.sizes().vec())));
  }
  at::Tensor x = at::gelu(conv1_->forward(input_features));     // in the model's dtype
  x = at::gelu(conv2_->forward(x));                             // [batch, d, frames / 2]
  return dropout_->forward(x.permute({0, 2, 1}) + positions_);  // [batch, frames / 2, d]
}

at::Tensor WhisperEncoder::run(const at::Tensor& x) const {
  return layers_.forward(0, x, WhisperStep{});  // every frame sees every frame
}

at::Tensor WhisperEncoder::finish(const at::Tensor& x) const { return layer_norm_->forward(x); }

WhisperDecoder::WhisperDecoder(const BuildContext& ctx, const WhisperConfig& c,
                               const layers::EncoderDecoderStage& stage,
                               bool embedding_on_last_stage)
    : config_(c) {
  if (stage.starts_decoder() || (embedding_on_last_stage && stage.ends_decoder())) {
    embed_tokens_ = register_module(
        "embed_tokens", layers::make_embedding(ctx.child("embed_tokens"), c.vocab_size, c.d_model));
  }
  if (stage.starts_decoder()) {
    embed_positions_ = register_module(
        "embed_positions",
        layers::make_embedding(ctx.child("embed_positions"), c.max_target_positions, c.d_model));
  }
  dropout_ = register_module("dropout",
                             std::make_shared<layers::Dropout>(ctx.child("dropout"), c.dropout));
  layers_ = layers::LayerStack<WhisperLayer>(
      *this, ctx, "layers", c.decoder_layers,
      [&](const auto& layer, int64_t i) {
        return std::make_shared<WhisperLayer>(layer, c, true, i);
      },
      stage.decoder_span());
  if (stage.ends_decoder()) layer_norm_ = layer_norm(*this, ctx, "layer_norm", c.d_model);
}

at::Tensor WhisperDecoder::embed(const at::Tensor& ids, int64_t past) const {
  const int64_t len = ids.size(1);
  if (past + len > config_.max_target_positions) {
    throw Error(str("Whisper: ", past + len, " decoder tokens exceed max_target_positions (",
                    config_.max_target_positions, ")"));
  }
  at::Tensor x = embed_tokens_->forward(ids);  // [batch, len, d_model]
  if (config_.scale_embedding) x = x * std::sqrt(static_cast<double>(config_.d_model));
  const at::Tensor positions =
      at::arange(past, past + len, ids.options()).unsqueeze(0).expand({ids.size(0), len});
  return dropout_->forward(x + embed_positions_->forward(positions));
}

at::Tensor WhisperDecoder::run(const at::Tensor& x, const at::Tensor& padding,
                               const WhisperStep& context) const {
  const int64_t past =
      context.self.cache != nullptr ? context.self.cache->length(first_layer()) : 0;
  WhisperStep step = context;
  step.self.mask = layers::attention_mask({.causal = true}, padding, x.size(0), x.size(1), past,
                                          x.device());  // [batch, 1, len, past + len]
  return layers_.forward(0, x, step);
}

at::Tensor WhisperDecoder::finish(const at::Tensor& x) const { return layer_norm_->forward(x); }

WhisperModel::WhisperModel(const BuildContext& ctx, const WhisperConfig& c,
                           bool embedding_on_last_stage)
    : config_(c),
      heads_(layers::head_projections(layers::context_at(ctx, "decoder.layers.0.self_attn"),
                                      {"q_proj", "k_proj", "v_proj", "out_proj"},
                                      c.decoder_attention_heads, c.decoder_attention_heads,
                                      c.d_model / c.decoder_attention_heads)
                 .heads),
      stage_(ctx, {.encoder_layers = c.encoder_layers,
                   .decoder_layers = c.decoder_layers,
                   .memory_padding = false}) {
  bind(ctx);
  if (stage_.holds_encoder()) {
    encoder_ = register_module("encoder",
                               std::make_shared<WhisperEncoder>(ctx.child("encoder"), c, stage_));
  }
  if (stage_.holds_decoder()) {
    decoder_ = register_module(
        "decoder",
        std::make_shared<WhisperDecoder>(ctx.child("decoder"), c, stage_, embedding_on_last_stage));
  }
}

at::Tensor WhisperModel::forward(const ForwardInputs& inputs) {
  return stage_.run(inputs,
                    {.encoder_input = [&] { return encoder_->embed(inputs.input_features); },
                     .encoder = [&](const at::Tensor& x) { return encoder_->run(x); },
                     .encoder_output = [&](const at::Tensor& x) { return encoder_->finish(x); },
                     .decoder_input =
                         [&] {
                           const int64_t past = inputs.cache != nullptr
                                                    ? inputs.cache->length(decoder_->first_layer())
                                                    : 0;
                           return decoder_->embed(inputs.decoder_input_ids, past);
                         },
                     .decoder =
                         [&](const at::Tensor& x, const WhisperStep& step) {
                           return decoder_->run(x, inputs.decoder_attention_mask, step);
                         },
                     .decoder_output = [&](const at::Tensor& x) { return decoder_->finish(x); }});
}

ModelShape WhisperModel::shape() const {
  // max_positions 0: the decoder checks its own positions; the encoder reads 30 s of audio.
  return ModelShape{.num_layers = config_.decoder_layers,
                    .num_heads = heads_,
                    .head_dim = config_.d_model / config_.decoder_attention_heads,
                    .hidden_size = config_.d_model,
                    .vocab_size = config_.vocab_size,
                    .max_positions = 0};
}

WhisperForConditionalGeneration::WhisperForConditionalGeneration(const BuildContext& ctx,
                                                                 const WhisperConfig& c)
    : Seq2SeqLM(ctx, c.decoder_start_token_id, c.pad_token_id) {
  model_ = register_module("model", std::make_shared<WhisperModel>(ctx.child("model"), c, true));
  set_stage(model_->stage());
  if (ends_model()) set_head(layers::tied_lm_head(ctx.child("proj_out"), model_->embed_tokens()));
}

}  // namespace shardformer::whisper

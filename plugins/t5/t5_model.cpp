// T5's blocks, stacks and heads, as in HF's modeling_t5.py.
#include "t5_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace shardformer::t5 {

using layers::context_at;
using layers::register_at;

namespace {

// HF's T5 in fp16 (modeling_t5.py, _keep_in_fp32_modules = ["wo"]): each feed-forward's wo holds
// and computes in fp32, so the residual stream turns fp32 at the first feed-forward; T5LayerNorm
// computes in fp32 and hands on its weight's dtype (fp16); a sum still in fp16 is clamped short
// of fp16's infinity (1000 shorter once it overflowed).
bool half(const BuildContext& ctx) { return ctx.dtype() == at::kHalf; }

at::Tensor t5_norm(const layers::ResidualNorm& norm, const at::Tensor& h) {
  const at::Tensor x = h.to(at::kFloat);  // [b, s, d_model]
  const at::Tensor normed = x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + norm.eps());
  return norm.weight() * normed.to(norm.weight().scalar_type());
}

at::Tensor clamp_half(const at::Tensor& h) {
  if (h.scalar_type() != at::kHalf) return h;
  const double max = std::numeric_limits<c10::Half>::max();
  const double bound = h.isinf().any().item<bool>() ? max - 1000 : max;
  return h.clamp(-bound, bound);
}

}  // namespace

T5Block::T5Block(const BuildContext& ctx, const T5Config& c, bool decoder, int64_t layer_idx)
    : half_(half(ctx)) {
  const c10::ScalarType wo_dtype = half_ ? at::kFloat : c10::ScalarType::Undefined;
  const auto norm = [&](const std::string& path) {
    return register_at(*this, path,
                       std::make_shared<layers::RMSNorm>(context_at(ctx, path), c.d_model,
                                                         c.layer_norm_epsilon))
        .get();
  };
  const auto dropout = [&](const std::string& path) {
    return register_at(*this, path,
                       std::make_shared<layers::Dropout>(context_at(ctx, path), c.dropout_rate))
        .get();
  };
  sublayers_.self_norm = norm("layer.0.layer_norm");
  sublayers_.self_attn =
      register_at(*this, "layer.0.SelfAttention",
                  std::make_shared<layers::SelfAttention>(
                      context_at(ctx, "layer.0.SelfAttention"),
                      layers::SelfAttentionOptions{.hidden_size = c.d_model,
                                                   .num_heads = c.num_heads,
                                                   .num_kv_heads = c.num_heads,
                                                   .head_dim = c.d_kv,
                                                   .scale = 1.0,  // T5 does not scale
                                                   .dropout = c.dropout_rate,
                                                   .out_name = "o",
                                                   .q_name = "q",
                                                   .k_name = "k",
                                                   .v_name = "v"},
                      layer_idx))
          .get();
  sublayers_.self_dropout = dropout("layer.0.dropout");
  if (decoder) {
    const BuildContext cross = context_at(ctx, "layer.1.EncDecAttention");
    cross.skip("relative_attention_bias.weight", "a table older checkpoints hold that HF ignores");
    sublayers_.cross_norm = norm("layer.1.layer_norm");
    sublayers_.cross_attn = register_at(*this, "layer.1.EncDecAttention",
                                        std::make_shared<layers::CrossAttention>(
                                            cross,
                                            layers::CrossAttentionOptions{.hidden_size = c.d_model,
                                                                          .num_heads = c.num_heads,
                                                                          .head_dim = c.d_kv,
                                                                          .scale = 1.0,
                                                                          .dropout = c.dropout_rate,
                                                                          .q_name = "q",
                                                                          .k_name = "k",
                                                                          .v_name = "v",
                                                                          .out_name = "o"},
                                            layer_idx))
                                .get();
    sublayers_.cross_dropout = dropout("layer.1.dropout");
  }
  const std::string ff = decoder ? "layer.2" : "layer.1";
  sublayers_.ff_norm = norm(ff + ".layer_norm");
  sublayers_.ff_dropout = dropout(ff + ".dropout");
  const std::string dense = ff + ".DenseReluDense";
  if (c.is_gated_act) {
    sublayers_.gated_mlp =
        register_at(*this, dense,
                    std::make_shared<layers::GatedMLP>(
                        context_at(ctx, dense), c.d_model, c.d_ff, c.dense_act_fn,
                        /*bias=*/false, /*fused_gate_up=*/false,
                        layers::GatedMLPNames{.gate = "wi_0",
                                              .up = "wi_1",
                                              .down = "wo",
                                              .inner_dropout = c.dropout_rate,
                                              .down_dtype = wo_dtype}))
            .get();
  } else {
    sublayers_.mlp =
        register_at(*this, dense,
                    std::make_shared<layers::MLP>(
                        context_at(ctx, dense), layers::MLPOptions{.hidden_size = c.d_model,
                                                                   .intermediate_size = c.d_ff,
                                                                   .activation = c.dense_act_fn,
                                                                   .bias = false,
                                                                   .in_name = "wi",
                                                                   .out_name = "wo",
                                                                   .inner_dropout = c.dropout_rate,
                                                                   .out_dtype = wo_dtype}))
            .get();
  }
}

at::Tensor T5Block::forward(const at::Tensor& x, const T5Step& step) {
  if (!half_) return layers::pre_norm_block(sublayers_, x, step);
  const layers::PreNormSublayers& s = sublayers_;
  at::Tensor h = clamp_half(
      x + layers::sublayer_dropout(s.self_dropout,
                                   s.self_attn->forward(t5_norm(*s.self_norm, x), step.self)));
  if (s.cross_attn != nullptr) {
    // The memory is fp16 (the encoder's final norm); a pipeline stage that received it beside
    // the fp32 stream holds it widened, exactly.
    const at::Tensor memory = step.memory.defined() ? step.memory.to(at::kHalf) : step.memory;
    h = clamp_half(h +
                   layers::sublayer_dropout(
                       s.cross_dropout, s.cross_attn->forward(t5_norm(*s.cross_norm, h), memory,
                                                              step.memory_mask, step.cross_cache)));
  }
  const at::Tensor normed = t5_norm(*s.ff_norm, h);
  const at::Tensor ff = s.mlp != nullptr ? s.mlp->forward(normed) : s.gated_mlp->forward(normed);
  return h + layers::sublayer_dropout(s.ff_dropout, ff);  // [b, s, d_model] in fp32: wo's output
}

namespace {

const char* const kBiasPath = "block.0.layer.0.SelfAttention.relative_attention_bias";

// How a stack's self-attention heads split over tp (the policy's rule for block 0's q and o).
layers::HeadProjections stack_heads(const BuildContext& stack, const T5Config& c) {
  return layers::head_projections(context_at(stack, "block.0.layer.0.SelfAttention"),
                                  {"q", "k", "v", "o"}, c.num_heads, c.num_heads, c.d_kv);
}

}  // namespace

T5Stack::T5Stack(const BuildContext& ctx, const T5Config& c, bool decoder,
                 std::shared_ptr<layers::Embedding> shared, layers::StackSpan span)
    : decoder_(decoder),
      count_(decoder ? c.num_decoder_layers : c.num_layers),
      shared_(std::move(shared)) {
  ctx.skip("embed_tokens.weight", "the stack's embedding is shared.weight (tied)");
  range_ = span.total > 0 ? ctx.layer_ranges(span.total, span.first, count_).front()
                          : LayerRange{0, count_};
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.dropout_rate));
  blocks_ = layers::LayerStack<T5Block>(
      *this, ctx, "block", count_,
      [&](const auto& block, int64_t i) { return std::make_shared<T5Block>(block, c, decoder, i); },
      span);
  bias_ = register_at(
      *this, kBiasPath,
      std::make_shared<layers::RelativePositionBias>(
          context_at(ctx, kBiasPath),
          layers::RelativePositionOptions{.num_buckets = c.relative_attention_num_buckets,
                                          .max_distance = c.relative_attention_max_distance,
                                          .num_heads = c.num_heads,
                                          .bidirectional = !decoder},
          stack_heads(ctx, c)));
  if (ends()) {
    final_layer_norm_ = register_module(
        "final_layer_norm", std::make_shared<layers::RMSNorm>(ctx.child("final_layer_norm"),
                                                              c.d_model, c.layer_norm_epsilon));
  }
}

at::Tensor T5Stack::embed(const at::Tensor& ids, const at::Tensor& embeds) const {
  return dropout_->forward(embeds.defined() ? embeds : shared_->forward(ids));  // [b, len, d]
}

at::Tensor T5Stack::run(const at::Tensor& x, const at::Tensor& padding,
                        const T5Step& context) const {
  const int64_t batch = x.size(0), len = x.size(1);
  const int64_t first = blocks_.first_layer(0);
  const int64_t past = context.self.cache != nullptr ? context.self.cache->length(first) : 0;
  T5Step step = context;
  step.self.mask = layers::attention_mask({.causal = decoder_}, padding, batch, len, past,
                                          x.device());     // [batch, 1, len, past + len]
  step.self.bias = bias_->forward(len, past + len, past);  // [1, heads/tp, len, past + len]
  return blocks_.forward(0, x, step);
}

at::Tensor T5Stack::finish(const at::Tensor& x) const {
  const bool in_half = final_layer_norm_->weight().scalar_type() == at::kHalf;
  return dropout_->forward(in_half ? t5_norm(*final_layer_norm_, x)
                                   : final_layer_norm_->forward(x));
}

namespace {

ModelShape t5_shape(const T5Config& c, int64_t layers, int64_t heads) {
  // Relative positions: no table bounds the length.
  return ModelShape{.num_layers = layers,
                    .num_heads = heads,
                    .head_dim = c.d_kv,
                    .hidden_size = c.d_model,
                    .vocab_size = c.vocab_size,
                    .max_positions = 0};
}

}  // namespace

T5ForConditionalGeneration::T5ForConditionalGeneration(const BuildContext& ctx, const T5Config& c)
    : Seq2SeqLM(ctx, c.decoder_start_token_id, c.pad_token_id),
      config_(c),
      heads_(stack_heads(ctx.child("decoder"), c).heads),
      stage_(ctx, {.encoder_layers = c.num_layers, .decoder_layers = c.num_decoder_layers}) {
  set_stage(stage_);
  // HF ties lm_head to shared unless the checkpoint holds a head of its own (flan-T5's).
  const bool tied = !ctx.checkpoint().contains(ctx.name_of("lm_head.weight"));
  if (stage_.starts_encoder() || stage_.starts_decoder() || (tied && stage_.ends_decoder())) {
    shared_ = register_module("shared",
                              layers::make_embedding(ctx.child("shared"), c.vocab_size, c.d_model));
  }
  if (stage_.holds_encoder()) {
    encoder_ = register_module(
        "encoder",
        std::make_shared<T5Stack>(ctx.child("encoder"), c, false, shared_, stage_.encoder_span()));
  }
  if (stage_.holds_decoder()) {
    decoder_ = register_module(
        "decoder",
        std::make_shared<T5Stack>(ctx.child("decoder"), c, true, shared_, stage_.decoder_span()));
  }
  if (stage_.ends_decoder()) {
    set_head(tied ? layers::tied_lm_head(ctx.child("lm_head"), shared_)
                  : register_module("lm_head", layers::make_lm_head(ctx.child("lm_head"),
                                                                    c.vocab_size, c.d_model)));
  }
}

at::Tensor T5ForConditionalGeneration::decoder_output(const ForwardInputs& inputs) {
  const at::Tensor out = stage_.run(  // [batch, tgt or keep, d_model] on the last stage
      inputs,
      {.encoder_input = [&] { return encoder_->embed(inputs.input_ids, inputs.inputs_embeds); },
       .encoder = [&](const at::Tensor& x) { return encoder_->run(x, inputs.attention_mask, {}); },
       .encoder_output = [&](const at::Tensor& x) { return encoder_->finish(x); },
       .decoder_input = [&] { return decoder_->embed(inputs.decoder_input_ids); },
       .decoder =
           [&](const at::Tensor& x, const T5Step& step) {
             return decoder_->run(x, inputs.decoder_attention_mask, step);
           },
       .decoder_output = [&](const at::Tensor& x) { return decoder_->finish(x); }});
  if (stage_.ends_decoder() && config_.scale_decoder_outputs) {
    return out * std::pow(static_cast<double>(config_.d_model), -0.5);
  }
  return out;
}

ModelShape T5ForConditionalGeneration::shape() const {
  return t5_shape(config_, config_.num_decoder_layers, heads_);
}

T5EncoderModel::T5EncoderModel(const BuildContext& ctx, const T5Config& c)
    : config_(c), heads_(stack_heads(ctx.child("encoder"), c).heads) {
  bind(ctx);
  if (ctx.pipeline() != nullptr) {
    throw ModelError(str(ctx.config().path().string(),
                         ": T5EncoderModel does not run under pipeline parallelism; run it with "
                         "pp = 1 (T5ForConditionalGeneration splits both stacks)"));
  }
  ctx.skip_module("decoder", "T5EncoderModel has no decoder");
  ctx.skip("lm_head.weight", "T5EncoderModel has no LM head");
  shared_ = register_module("shared",
                            layers::make_embedding(ctx.child("shared"), c.vocab_size, c.d_model));
  encoder_ = register_module("encoder", std::make_shared<T5Stack>(ctx.child("encoder"), c, false,
                                                                  shared_, layers::StackSpan{}));
}

at::Tensor T5EncoderModel::forward(const ForwardInputs& inputs) {
  return encoder_->finish(
      encoder_->run(encoder_->embed(inputs.input_ids), inputs.attention_mask, T5Step{}));
}

ModelShape T5EncoderModel::shape() const { return t5_shape(config_, config_.num_layers, heads_); }

}  // namespace shardformer::t5

// T5's blocks, stacks and heads, as in HF's modeling_t5.py.
#include "t5_model.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/losses.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>

namespace shardformer::t5 {

using layers::context_at;
using layers::register_at;

T5Block::T5Block(const BuildContext& ctx, const T5Config& c, bool decoder, int64_t layer_idx) {
  const auto norm = [&](const std::string& path) {
    return register_at(
        *this, path,
        std::make_shared<layers::RMSNorm>(context_at(ctx, path), c.d_model, c.layer_norm_epsilon));
  };
  const auto dropout = [&](const std::string& path) {
    return register_at(*this, path,
                       std::make_shared<layers::Dropout>(context_at(ctx, path), c.dropout_rate));
  };
  const BuildContext self = context_at(ctx, "layer.0.SelfAttention");
  self_norm_ = norm("layer.0.layer_norm");
  self_attn_ = register_at(*this, "layer.0.SelfAttention",
                           std::make_shared<layers::SelfAttention>(
                               self,
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
                               layer_idx));
  self_dropout_ = dropout("layer.0.dropout");
  if (decoder) {
    const BuildContext cross = context_at(ctx, "layer.1.EncDecAttention");
    cross.skip("relative_attention_bias.weight", "a table older checkpoints hold that HF ignores");
    cross_norm_ = norm("layer.1.layer_norm");
    cross_attn_ = register_at(*this, "layer.1.EncDecAttention",
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
                                  layer_idx));
    cross_dropout_ = dropout("layer.1.dropout");
  }
  const std::string ff = decoder ? "layer.2" : "layer.1";
  ff_norm_ = norm(ff + ".layer_norm");
  ff_dropout_ = dropout(ff + ".dropout");
  const std::string dense = ff + ".DenseReluDense";
  if (c.is_gated_act) {
    gated_mlp_ = register_at(
        *this, dense,
        std::make_shared<layers::GatedMLP>(
            context_at(ctx, dense), c.d_model, c.d_ff, c.dense_act_fn,
            /*bias=*/false, /*fused_gate_up=*/false,
            layers::GatedMLPNames{
                .gate = "wi_0", .up = "wi_1", .down = "wo", .inner_dropout = c.dropout_rate}));
  } else {
    mlp_ = register_at(
        *this, dense,
        std::make_shared<layers::MLP>(context_at(ctx, dense),
                                      layers::MLPOptions{.hidden_size = c.d_model,
                                                         .intermediate_size = c.d_ff,
                                                         .activation = c.dense_act_fn,
                                                         .bias = false,
                                                         .in_name = "wi",
                                                         .out_name = "wo",
                                                         .inner_dropout = c.dropout_rate}));
  }
}

at::Tensor T5Block::forward(const at::Tensor& x, const T5Step& step) {
  // Pre-norm sublayers: x + dropout(sublayer(norm(x))), each sum normed by the next sublayer's
  // norm in the same pass.
  const layers::ResidualNorm* after_self = cross_attn_ ? cross_norm_.get() : ff_norm_.get();
  layers::ResidualSum h = self_attn_->forward_residual(self_norm_->forward(x), step.self, x,
                                                       after_self, self_dropout_.get());
  if (cross_attn_) {
    h = cross_attn_->forward_residual(h.normed, step.memory, step.memory_mask, step.cross_cache,
                                      h.sum, ff_norm_.get(), cross_dropout_.get());
  }
  return mlp_ ? mlp_->forward_residual(h.normed, h.sum, nullptr, ff_dropout_.get()).sum
              : gated_mlp_->forward_residual(h.normed, h.sum, nullptr, ff_dropout_.get()).sum;
}

namespace {

const char* const kBiasPath = "block.0.layer.0.SelfAttention.relative_attention_bias";

// How a stack's self-attention heads split over tp (the policy's rule for block 0's q and o).
layers::HeadProjections stack_heads(const BuildContext& stack, const T5Config& c) {
  const BuildContext attention = context_at(stack, "block.0.layer.0.SelfAttention");
  const bool split = layers::split_pair(attention.child("q"), attention.child("o"));
  return layers::head_projections(attention, split, c.num_heads, c.num_heads, c.d_kv);
}

// This stage's layers among a pipeline's (all of them without one); one chunk only.
LayerRange stage_range(const BuildContext& ctx, int64_t total) {
  const std::vector<LayerRange> ranges = ctx.layer_ranges(total);
  if (ranges.size() != 1) {
    throw ModelError(str(ctx.config().path().string(),
                         ": T5 does not run under the interleaved schedule (several model "
                         "chunks per stage); use 1F1B or GPipe"));
  }
  return ranges.front();
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

at::Tensor T5Stack::embed(const at::Tensor& ids) const {
  return dropout_->forward(shared_->forward(ids));  // [batch, len, d_model]
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
  return dropout_->forward(final_layer_norm_->forward(x));
}

namespace {

void refuse_sequence_parallelism(const BuildContext& ctx) {
  if (ctx.parallel() != nullptr && ctx.parallel()->config.enable_sequence_parallelism) {
    throw ModelError(str(ctx.config().path().string(),
                         ": T5 does not run under sequence parallelism; set "
                         "shard.enable_sequence_parallelism = false"));
  }
}

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
    : config_(c),
      decoder_start_token_id_(ctx.config().get_int("decoder_start_token_id", 0)),
      pad_token_id_(ctx.config().get_int("pad_token_id", 0)),
      heads_(stack_heads(ctx.child("decoder"), c).heads),
      parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  refuse_sequence_parallelism(ctx);
  const int64_t encoder_layers = c.num_layers, total = c.num_layers + c.num_decoder_layers;
  range_ = stage_range(ctx, total);
  const bool pipelined = ctx.pipeline() != nullptr;
  const bool encoder_here = range_.begin<encoder_layers, decoder_here = range_.end> encoder_layers;
  const bool starts_decoder = decoder_here && range_.begin <= encoder_layers;
  // HF ties lm_head to shared unless the checkpoint holds a head of its own (flan-T5's).
  const bool tied = !ctx.checkpoint().contains("lm_head.weight");
  if (range_.begin == 0 || starts_decoder || (tied && range_.end == total)) {
    shared_ = register_module("shared",
                              layers::make_embedding(ctx.child("shared"), c.vocab_size, c.d_model));
  }
  if (encoder_here) {
    encoder_ = register_module(
        "encoder", std::make_shared<T5Stack>(ctx.child("encoder"), c, false, shared_,
                                             layers::StackSpan{0, pipelined ? total : 0}));
  }
  if (decoder_here) {
    decoder_ = register_module(
        "decoder",
        std::make_shared<T5Stack>(ctx.child("decoder"), c, true, shared_,
                                  layers::StackSpan{encoder_layers, pipelined ? total : 0}));
  }
  if (range_.end == total) {
    lm_head_ = tied ? layers::tied_lm_head(ctx.child("lm_head"), shared_)
                    : register_module("lm_head", layers::make_lm_head(ctx.child("lm_head"),
                                                                      c.vocab_size, c.d_model));
  }
}

at::Tensor T5ForConditionalGeneration::run_stage(const ForwardInputs& inputs) {
  if (!inputs.decoder_input_ids.defined()) {
    throw Error(
        "T5ForConditionalGeneration needs decoder_input_ids (or labels, shifted right into "
        "them)");
  }
  // The encoder runs when the pass has its input (training, the first decoding step); later
  // decoding steps read its keys and values from the cross-attention cache.
  const bool encoding = inputs.input_ids.defined();
  const int64_t tgt = inputs.decoder_input_ids.size(1);
  at::Tensor memory, x;  // the encoder's output [b, src, d]; the decoder's hidden [b, tgt, d]
  if (encoding && encoder_) {
    at::Tensor h = encoder_->starts() ? encoder_->embed(inputs.input_ids)
                                      : layers::stage_input(inputs);  // [batch, src, d_model]
    h = encoder_->run(h, inputs.attention_mask, T5Step{});
    if (!encoder_->ends()) return h;
    memory = encoder_->finish(h);
    if (!decoder_) return memory;  // the encoder ends this stage: its output goes on
  } else if (!decoder_->starts()) {
    const at::Tensor& in = layers::stage_input(inputs);  // [batch, tgt (+ src), d_model]
    x = in.narrow(1, 0, tgt);
    if (encoding) memory = in.narrow(1, tgt, in.size(1) - tgt);
  } else if (encoding) {
    memory = layers::stage_input(inputs);  // the encoder's output, from the stage before
  }
  if (decoder_->starts()) x = decoder_->embed(inputs.decoder_input_ids);
  T5Step context;
  context.self.cache = inputs.cache;
  context.memory = memory;
  context.memory_mask = layers::memory_mask(inputs.attention_mask);
  context.cross_cache = inputs.cross_cache;
  x = decoder_->run(x, inputs.decoder_attention_mask, context);
  if (!decoder_->ends()) return encoding ? at::cat({x, memory}, 1) : x;
  at::Tensor hidden = decoder_->finish(x);  // [batch, tgt, d_model]
  if (inputs.logits_to_keep > 0 && inputs.logits_to_keep < tgt) {
    hidden = hidden.narrow(1, tgt - inputs.logits_to_keep, inputs.logits_to_keep).contiguous();
  }
  if (config_.scale_decoder_outputs) {
    hidden = hidden * std::pow(static_cast<double>(config_.d_model), -0.5);
  }
  return hidden;
}

at::Tensor T5ForConditionalGeneration::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = run_stage(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  const auto gather = inputs.logits_on_first_tp_rank ? layers::LogitsGather::kFirstRank
                                                     : layers::LogitsGather::kAll;
  return lm_head_->lm_logits(hidden, gather).logits;  // [batch, tgt, vocab]
}

ForwardInputs T5ForConditionalGeneration::with_labels(const ForwardInputs& inputs,
                                                      const at::Tensor& labels) const {
  ForwardInputs batch = inputs;
  if (batch.decoder_input_ids.defined() || !labels.defined()) return batch;
  at::Tensor shifted = at::full_like(labels, decoder_start_token_id_);  // HF's _shift_right
  shifted.narrow(1, 1, labels.size(1) - 1).copy_(labels.narrow(1, 0, labels.size(1) - 1));
  batch.decoder_input_ids = shifted.masked_fill(shifted == kIgnoreIndex, pad_token_id_);
  return batch;
}

at::Tensor T5ForConditionalGeneration::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("loss runs on the last pipeline piece");
  const ForwardInputs batch = with_labels(inputs, labels);
  if (!parallel_output_) return Model::loss(batch, labels);
  return cross_entropy_loss(lm_head_->lm_logits(run_stage(batch), layers::LogitsGather::kNone),
                            labels);
}

bool T5ForConditionalGeneration::runs_step(const ForwardInputs& inputs, int64_t /*chunk*/) const {
  return inputs.input_ids.defined() || decoder_ != nullptr;
}

bool T5ForConditionalGeneration::starts_step(const ForwardInputs& inputs, int64_t chunk) const {
  return inputs.input_ids.defined() ? starts_model(chunk) : decoder_ && decoder_->starts();
}

ModelShape T5ForConditionalGeneration::shape() const {
  return t5_shape(config_, config_.num_decoder_layers, heads_);
}

T5EncoderModel::T5EncoderModel(const BuildContext& ctx, const T5Config& c)
    : config_(c), heads_(stack_heads(ctx.child("encoder"), c).heads) {
  bind(ctx);
  refuse_sequence_parallelism(ctx);
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

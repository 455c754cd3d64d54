// GPT-2's forward pass, as in HF transformers' modeling_gpt2.py; tensor parallel where the
// policy says.
#include "gpt2_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::gpt2 {
GPT2Config GPT2Config::from(const HFConfig& c) {
  GPT2Config g{};
  g.vocab_size = c.get_int("vocab_size");
  g.n_positions = c.get_int("n_positions");
  g.n_embd = c.get_int("n_embd");
  g.n_layer = c.get_int("n_layer");
  g.n_head = c.get_int("n_head");
  g.n_inner = c.get_optional_int("n_inner").value_or(4 * g.n_embd);
  g.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-5);
  g.embd_pdrop = c.get_probability("embd_pdrop", 0.1);
  g.resid_pdrop = c.get_probability("resid_pdrop", 0.1);
  g.attn_pdrop = c.get_probability("attn_pdrop", 0.1);
  g.activation = layers::config_activation(c, "activation_function", "gelu_new");
  g.scale_attn_weights = c.get_bool("scale_attn_weights", true);
  g.scale_attn_by_inverse_layer_idx = c.get_bool("scale_attn_by_inverse_layer_idx", false);
  g.reorder_and_upcast_attn = c.get_bool("reorder_and_upcast_attn", false);
  g.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  if (const auto n_ctx = c.get_optional_int("n_ctx"); n_ctx && *n_ctx != g.n_positions) {
    throw ModelError(str(c.path().string(), ": n_ctx (", *n_ctx, ") differs from n_positions (",
                         g.n_positions, ")"));
  }
  // Only GPT2DoubleHeadsModel and GPT2ForSequenceClassification read these.
  c.ignore({"summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
            "summary_first_dropout"});
  c.require(g.vocab_size > 0 && g.n_positions > 0 && g.n_embd > 0 && g.n_layer > 0 &&
                g.n_head > 0 && g.n_inner > 0,
            "vocab_size, n_positions, n_embd, n_layer, n_head and n_inner must be positive");
  c.require(g.n_embd % g.n_head == 0,
            str("n_embd (", g.n_embd, ") is not divisible by n_head (", g.n_head, ")"));
  c.require(
      !c.get_bool("add_cross_attention", false),
      "add_cross_attention = true (GPT-2 as a decoder with cross-attention) is not supported");
  return g;
}

namespace {

const layers::LinearOptions kConv1D{.bias = true, .layout = layers::WeightLayout::kConv1D};

std::shared_ptr<layers::LayerNorm> layer_norm(const BuildContext& ctx, const GPT2Config& config) {
  return std::make_shared<layers::LayerNorm>(ctx, config.n_embd, config.layer_norm_epsilon);
}

}  // namespace

GPT2Attention::GPT2Attention(const BuildContext& ctx, const GPT2Config& config, int64_t layer_idx)
    : layer_idx_(layer_idx), head_dim_(config.head_dim()), upcast_(config.reorder_and_upcast_attn) {
  const bool split =
      layers::split_pair(ctx.child("c_attn"), ctx.child("c_proj"), /*column_blocks=*/3);
  num_heads_ = split ? ctx.divide_by_tp(config.n_head, "n_head") : config.n_head;
  // Old checkpoints store the causal mask as buffers; the mask is computed instead.
  ctx.skip("bias", "GPT-2's causal-mask buffer");
  ctx.skip("masked_bias", "GPT-2's masked-score buffer");
  c_attn_ = register_module("c_attn", layers::make_linear(ctx.child("c_attn"), config.n_embd,
                                                          3 * config.n_embd, kConv1D));
  c_proj_ = register_module(
      "c_proj", layers::make_linear(ctx.child("c_proj"), config.n_embd, config.n_embd, kConv1D));
  // Attention probabilities [batch, heads/tp, q, kv]: each head its own stream, wherever it is.
  const int64_t first_head = split ? ctx.tp_rank() * num_heads_ : 0;
  attn_dropout_ = register_module(
      "attn_dropout",
      std::make_shared<layers::Dropout>(
          ctx.child("attn_dropout"), config.attn_pdrop,
          layers::DropoutSlices{
              .dim = 1, .total = config.n_head, .first = first_head, .count = num_heads_}));
  // After the row-parallel all-reduce the activation is replicated: one mask on every rank.
  resid_dropout_ = register_module(
      "resid_dropout",
      std::make_shared<layers::Dropout>(ctx.child("resid_dropout"), config.resid_pdrop));
  scale_ = config.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  if (config.scale_attn_by_inverse_layer_idx) scale_ /= static_cast<double>(layer_idx + 1);
}

layers::ResidualSum GPT2Attention::forward(const at::Tensor& x, const layers::AttentionStep& step,
                                           const at::Tensor& residual,
                                           const layers::LayerNorm& norm) {
  const std::vector<at::Tensor> qkv = c_attn_->forward(x).chunk(3, -1);  // 3 x [.., hidden/tp]
  const auto heads = [&](const at::Tensor& t) {  // [batch, heads/tp, seq, head_dim]
    return layers::split_heads(t, num_heads_, head_dim_);
  };
  const at::Tensor out = layers::attention(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]),
                                           {.mask = step.mask,
                                            .causal = step.causal,
                                            .scale = scale_,
                                            .dropout = attn_dropout_.get(),
                                            .cache = step.cache,
                                            .layer = layer_idx_,
                                            .upcast = upcast_,
                                            .sequence = step.sequence.get()});  // [b, s, hidden/tp]
  // residual + resid_dropout(c_proj(out)) [b, s, hidden], and its norm
  return layers::add_to_residual(*c_proj_, out, resid_dropout_.get(), residual, &norm,
                                 step.sequence.get());
}

GPT2MLP::GPT2MLP(const BuildContext& ctx, const GPT2Config& config)
    : activation_(config.activation) {
  if (layers::split_pair(ctx.child("c_fc"), ctx.child("c_proj"))) {
    ctx.divide_by_tp(config.n_inner, "n_inner");
  }
  c_fc_ = register_module(
      "c_fc", layers::make_linear(ctx.child("c_fc"), config.n_embd, config.n_inner, kConv1D));
  c_proj_ = register_module(
      "c_proj", layers::make_linear(ctx.child("c_proj"), config.n_inner, config.n_embd, kConv1D));
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), config.resid_pdrop));
}

layers::ResidualSum GPT2MLP::forward(const at::Tensor& x, const SequenceSplit* sequence,
                                     const at::Tensor& residual, const layers::ResidualNorm* next) {
  const at::Tensor h = layers::apply_activation(activation_, c_fc_->forward(x));  // [.., inner/tp]
  // residual + dropout(c_proj(h)) [.., hidden], and next's norm of it
  return layers::add_to_residual(*c_proj_, h, dropout_.get(), residual, next, sequence);
}

GPT2Block::GPT2Block(const BuildContext& ctx, const GPT2Config& config, int64_t layer_idx) {
  ln_1_ = register_module("ln_1", layer_norm(ctx.child("ln_1"), config));
  attn_ = register_module("attn",
                          std::make_shared<GPT2Attention>(ctx.child("attn"), config, layer_idx));
  ln_2_ = register_module("ln_2", layer_norm(ctx.child("ln_2"), config));
  mlp_ = register_module("mlp", std::make_shared<GPT2MLP>(ctx.child("mlp"), config));
}

at::Tensor GPT2Block::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum GPT2Block::forward(const layers::ResidualSum& in,
                                       const layers::AttentionStep& step,
                                       const layers::ResidualNorm* next) {
  // h = x + attn(ln_1(x)), taken with ln_2(h); then h + mlp(ln_2(h)), taken with the next
  // block's ln_1. The residual adds and norms go into the sublayers' last products, which fuse
  // them with tp's sums where they can.
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const layers::ResidualSum h =
      attn_->forward(in.normed.defined() ? in.normed : ln_1_->forward(x), step, x, *ln_2_);
  return mlp_->forward(h.normed, step.sequence.get(), h.sum, next);
}

GPT2Model::GPT2Model(const BuildContext& ctx, const GPT2Config& config, bool wte_on_last_stage)
    : config_(config) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (wte_on_last_stage && last)) {
    wte_ = register_module(
        "wte", layers::make_embedding(ctx.child("wte"), config.vocab_size, config.n_embd));
  }
  if (first) {
    wpe_ = register_module(
        "wpe", layers::make_embedding(ctx.child("wpe"), config.n_positions, config.n_embd));
    drop_ = register_module(
        "drop", std::make_shared<layers::Dropout>(ctx.child("drop"), config.embd_pdrop));
  }
  h_ = layers::LayerStack<GPT2Block>(
      *this, ctx, "h", config.n_layer,
      [&](const auto& c, int64_t i) { return std::make_shared<GPT2Block>(c, config, i); });
  if (last) ln_f_ = register_module("ln_f", layer_norm(ctx.child("ln_f"), config));
}

ModelShape GPT2Model::shape() const {
  return ModelShape{.num_layers = config_.n_layer,
                    .num_heads = h_.front()->num_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.n_embd,
                    .vocab_size = config_.vocab_size,
                    .max_positions = config_.n_positions};
}

at::Tensor GPT2Model::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step =
      layers::forward_step(inputs, h_.first_layer(chunk), {}, sequence_parallelism());
  at::Tensor x =  // [batch, seq, hidden] (this rank's tokens when the sequence is split)
      starts_model(chunk) ? step.split(drop_->forward(wte_->forward(inputs.input_ids) +
                                                      wpe_->forward(step.positions)))
                          : layers::stage_input(inputs);
  x = h_.forward(chunk, x,
                 layers::AttentionStep{.mask = step.mask,
                                       .causal = step.causal,
                                       .cache = inputs.cache,
                                       .sequence = step.sequence});
  // The final norm runs on this rank's tokens; the whole sequence is gathered once, normed.
  return ends_model(chunk) ? step.join(ln_f_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::gpt2

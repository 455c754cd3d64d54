// GPT-J's config and forward pass, as in HF's modeling_gptj.py.
#include "gptj_model.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/parallel_residual.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::gptj {

GPTJConfig GPTJConfig::from(const HFConfig& c) {
  GPTJConfig g{};
  c.require(c.model_type() == "gptj", "model_type '" + c.model_type() + "' is not a GPT-J model");
  g.vocab_size = c.get_int("vocab_size");
  g.n_positions = c.get_int("n_positions");
  g.n_embd = c.get_int("n_embd");
  g.n_layer = c.get_int("n_layer");
  g.n_head = c.get_int("n_head");
  c.require(g.n_head > 0 && g.n_embd % g.n_head == 0, "n_embd must divide by n_head");
  // HF's sin / cos table is rotary_dim wide; without rotary_dim it is n_embd wide and fits
  // heads of one head only, so a null rotary_dim is refused.
  const std::optional<int64_t> rotary_dim = c.get_optional_int("rotary_dim");
  c.require(rotary_dim.has_value(), "rotary_dim must be set (a whole head: head_dim)");
  g.rotary_dim = *rotary_dim;
  c.require(
      g.rotary_dim > 0 && g.rotary_dim % 2 == 0 && g.rotary_dim <= g.head_dim(),
      str("rotary_dim ", g.rotary_dim, " must be even and at most the head size ", g.head_dim()));
  g.n_inner = c.get_optional_int("n_inner").value_or(4 * g.n_embd);
  g.activation_function = layers::config_activation(c, "activation_function", "gelu_new");
  g.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-5);
  g.resid_pdrop = c.get_probability("resid_pdrop", 0.0);
  g.embd_pdrop = c.get_probability("embd_pdrop", 0.0);
  g.attn_pdrop = c.get_probability("attn_pdrop", 0.0);
  g.tie_word_embeddings = c.get_bool("tie_word_embeddings", false);
  c.require(g.vocab_size > 0 && g.n_layer > 0 && g.n_inner > 0, "sizes must be positive");
  return g;
}

GPTJBlock::GPTJBlock(const BuildContext& ctx, const GPTJConfig& c, int64_t layer_idx) {
  ln_1_ = register_module("ln_1", std::make_shared<layers::LayerNorm>(ctx.child("ln_1"), c.n_embd,
                                                                      c.layer_norm_epsilon));
  const BuildContext attn = ctx.child("attn");
  for (const char* buffer : {"bias", "masked_bias"}) {  // older transformers' causal mask
    attn.skip(buffer, "a buffer HF recomputes");
  }
  attn_ = register_module("attn", std::make_shared<layers::SelfAttention>(
                                      attn,
                                      layers::SelfAttentionOptions{.hidden_size = c.n_embd,
                                                                   .num_heads = c.n_head,
                                                                   .num_kv_heads = c.n_head,
                                                                   .head_dim = c.head_dim(),
                                                                   .dropout = c.attn_pdrop,
                                                                   .out_name = "out_proj"},
                                      layer_idx));
  attn_resid_dropout_ = attn_->register_module(
      "resid_dropout",
      std::make_shared<layers::Dropout>(attn.child("resid_dropout"), c.resid_pdrop));
  mlp_ = register_module(
      "mlp", std::make_shared<layers::MLP>(ctx.child("mlp"),
                                           layers::MLPOptions{.hidden_size = c.n_embd,
                                                              .intermediate_size = c.n_inner,
                                                              .activation = c.activation_function,
                                                              .in_name = "fc_in",
                                                              .out_name = "fc_out"}));
  mlp_dropout_ = mlp_->register_module(
      "dropout",
      std::make_shared<layers::Dropout>(ctx.child("mlp").child("dropout"), c.resid_pdrop));
}

at::Tensor GPTJBlock::forward(const at::Tensor& x, const layers::AttentionStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum GPTJBlock::forward(const layers::ResidualSum& in,
                                       const layers::AttentionStep& step,
                                       const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  const at::Tensor h = in.normed.defined() ? in.normed : ln_1_->forward(x);
  return layers::parallel_residual(*attn_, h, step, *mlp_, h, x, next, attn_resid_dropout_.get(),
                                   mlp_dropout_.get());
}

GPTJModel::GPTJModel(const BuildContext& ctx, const GPTJConfig& config,
                     bool embedding_on_last_stage)
    : config_(config),
      rotary_(ctx.config(), config.head_dim(),
              {.max_positions_key = "n_positions",
               .rotary_dim = config.rotary_dim,
               .interleaved = true}) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    wte_ = register_module(
        "wte", layers::make_embedding(ctx.child("wte"), config.vocab_size, config.n_embd));
  }
  drop_ = register_module("drop",
                          std::make_shared<layers::Dropout>(ctx.child("drop"), config.embd_pdrop));
  h_ = layers::LayerStack<GPTJBlock>(
      *this, ctx, "h", config.n_layer,
      [&](const auto& c, int64_t i) { return std::make_shared<GPTJBlock>(c, config, i); });
  if (last) {
    ln_f_ =
        register_module("ln_f", std::make_shared<layers::LayerNorm>(
                                    ctx.child("ln_f"), config.n_embd, config.layer_norm_epsilon));
  }
}

ModelShape GPTJModel::shape() const {
  return ModelShape{.num_layers = config_.n_layer,
                    .num_heads = h_.front()->num_kv_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.n_embd,
                    .vocab_size = config_.vocab_size,
                    .max_positions = config_.n_positions};  // HF's sin / cos table
}

at::Tensor GPTJModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step =
      layers::forward_step(inputs, h_.first_layer(chunk), {}, sequence_parallelism());
  at::Tensor x = starts_model(chunk) ? drop_->forward(step.split(wte_->forward(inputs.input_ids)),
                                                      step.sequence.get())
                                     : layers::stage_input(inputs);  // [batch, seq, hidden]
  layers::AttentionStep layer_step{.mask = step.mask,
                                   .causal = step.causal,
                                   .interleaved = true,
                                   .cache = inputs.cache,
                                   .sequence = step.sequence};
  const auto [cos, sin] = rotary_.cos_sin(step.positions, x.scalar_type());  // [b, s, rotary]
  layer_step.cos = step.for_layers(cos);
  layer_step.sin = step.for_layers(sin);
  x = h_.forward(chunk, x, layer_step);
  return ends_model(chunk) ? step.join(ln_f_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::gptj

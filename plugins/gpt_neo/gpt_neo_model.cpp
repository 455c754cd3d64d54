// GPT-Neo's config and forward pass, as in HF's modeling_gpt_neo.py.
#include "gpt_neo_model.h"

#include "shardformer/checkpoint_io/layer_types.h"
#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/layers/parallel_residual.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::gpt_neo {
namespace {

// attention_types [[["global", "local"], 12]] expands to 24 layers alternating global and local;
// attention_layers, which HF writes beside it, must say the same.
std::vector<bool> layers_with_window(const HFConfig& c, int64_t num_layers) {
  std::optional<std::vector<bool>> local =
      windowed_layers(c, "attention_layers", num_layers, "global", "local");
  c.require(local.has_value(), "attention_layers must list each layer's attention type");
  // attention_types is HF's constructor argument that attention_layers expands: read, and
  // checked against it where this version can parse it (the nested lists of its schema).
  c.ignore({"attention_types"});
  return *local;
}

}  // namespace

GPTNeoConfig GPTNeoConfig::from(const HFConfig& c) {
  GPTNeoConfig g{};
  c.require(c.model_type() == "gpt_neo",
            "model_type '" + c.model_type() + "' is not a GPT-Neo model");
  g.vocab_size = c.get_int("vocab_size");
  g.max_position_embeddings = c.get_int("max_position_embeddings");
  g.hidden_size = c.get_int("hidden_size");
  g.num_layers = c.get_int("num_layers");
  g.num_heads = c.get_int("num_heads");
  c.require(g.num_heads > 0 && g.hidden_size % g.num_heads == 0,
            "hidden_size must divide by num_heads");
  g.intermediate_size = c.get_optional_int("intermediate_size").value_or(4 * g.hidden_size);
  g.window_size = c.get_int("window_size", 256);
  g.activation_function = layers::config_activation(c, "activation_function", "gelu_new");
  g.layer_norm_epsilon = c.get_double("layer_norm_epsilon", 1e-5);
  g.resid_dropout = c.get_probability("resid_dropout", 0.0);
  g.embed_dropout = c.get_probability("embed_dropout", 0.0);
  g.attention_dropout = c.get_probability("attention_dropout", 0.0);
  g.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  c.require(g.vocab_size > 0 && g.num_layers > 0 && g.intermediate_size > 0 &&
                g.max_position_embeddings > 0 && g.window_size > 0,
            "sizes must be positive");
  g.local_layers = layers_with_window(c, g.num_layers);
  // Read by HF's sequence- and token-classification heads only, which this plugin does not build.
  c.ignore({"classifier_dropout"});
  return g;
}

GPTNeoBlock::GPTNeoBlock(const BuildContext& ctx, const GPTNeoConfig& c, int64_t layer_idx)
    : local_(c.local_layers[layer_idx]) {
  const auto norm = [&](const char* name) {
    return register_module(name, std::make_shared<layers::LayerNorm>(ctx.child(name), c.hidden_size,
                                                                     c.layer_norm_epsilon));
  };
  ln_1_ = norm("ln_1");
  const BuildContext attention = ctx.child("attn").child("attention");
  for (const char* buffer : {"bias", "masked_bias"}) {  // the causal / window mask, recomputed
    attention.skip(buffer, "a buffer HF recomputes");
  }
  attention_ =
      layers::register_at(*this, "attn.attention",
                          std::make_shared<layers::SelfAttention>(
                              attention,
                              layers::SelfAttentionOptions{.hidden_size = c.hidden_size,
                                                           .num_heads = c.num_heads,
                                                           .num_kv_heads = c.num_heads,
                                                           .head_dim = c.head_dim(),
                                                           .out_bias = true,
                                                           .scale = 1.0,  // GPT-Neo does not scale
                                                           .dropout = c.attention_dropout,
                                                           .out_name = "out_proj"},
                              layer_idx));
  resid_dropout_ = attention_->register_module(
      "resid_dropout",
      std::make_shared<layers::Dropout>(attention.child("resid_dropout"), c.resid_dropout));
  ln_2_ = norm("ln_2");
  const BuildContext mlp = ctx.child("mlp");
  mlp_ =
      register_module("mlp", std::make_shared<layers::MLP>(
                                 mlp, layers::MLPOptions{.hidden_size = c.hidden_size,
                                                         .intermediate_size = c.intermediate_size,
                                                         .activation = c.activation_function,
                                                         .in_name = "c_fc",
                                                         .out_name = "c_proj"}));
  mlp_dropout_ = mlp_->register_module(
      "dropout", std::make_shared<layers::Dropout>(mlp.child("dropout"), c.resid_dropout));
}

at::Tensor GPTNeoBlock::forward(const at::Tensor& x, const GPTNeoStep& step) {
  return forward(layers::ResidualSum{x, at::Tensor()}, step, nullptr).sum;
}

layers::ResidualSum GPTNeoBlock::forward(const layers::ResidualSum& in, const GPTNeoStep& step,
                                         const layers::ResidualNorm* next) {
  const at::Tensor& x = in.sum;  // [batch, seq, hidden]
  return layers::sequential_residual(*attention_,
                                     in.normed.defined() ? in.normed : ln_1_->forward(x),
                                     local_ ? step.local : step.global, *ln_2_, *mlp_, x, next,
                                     resid_dropout_.get(), mlp_dropout_.get());
}

GPTNeoModel::GPTNeoModel(const BuildContext& ctx, const GPTNeoConfig& config,
                         bool embedding_on_last_stage)
    : config_(config) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  if (first || (embedding_on_last_stage && last)) {
    wte_ = register_module(
        "wte", layers::make_embedding(ctx.child("wte"), config.vocab_size, config.hidden_size));
  }
  if (first) {
    wpe_ = register_module("wpe",
                           layers::make_embedding(ctx.child("wpe"), config.max_position_embeddings,
                                                  config.hidden_size));
  }
  drop_ = register_module(
      "drop", std::make_shared<layers::Dropout>(ctx.child("drop"), config.embed_dropout));
  h_ = layers::LayerStack<GPTNeoBlock>(
      *this, ctx, "h", config.num_layers,
      [&](const auto& c, int64_t i) { return std::make_shared<GPTNeoBlock>(c, config, i); });
  if (last) {
    ln_f_ = register_module(
        "ln_f", std::make_shared<layers::LayerNorm>(ctx.child("ln_f"), config.hidden_size,
                                                    config.layer_norm_epsilon));
  }
}

ModelShape GPTNeoModel::shape() const {
  return ModelShape{.num_layers = config_.num_layers,
                    .num_heads = h_.front()->num_kv_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.hidden_size,
                    .vocab_size = config_.vocab_size,
                    .max_positions = config_.max_position_embeddings};
}

at::Tensor GPTNeoModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const int64_t first = h_.first_layer(chunk);
  const layers::ForwardStep step = layers::forward_step(inputs, first, {}, sequence_parallelism());
  at::Tensor x =  // [batch, seq, hidden]
      starts_model(chunk) ? step.split(drop_->forward(wte_->forward(inputs.input_ids) +
                                                      wpe_->forward(step.positions)))
                          : layers::stage_input(inputs);
  GPTNeoStep blocks{.global = {.mask = step.mask,
                               .causal = step.causal,
                               .cache = inputs.cache,
                               .sequence = step.sequence}};
  blocks.local = blocks.global;
  const auto& chunk_blocks = h_.chunk(chunk);
  if (std::any_of(chunk_blocks.begin(), chunk_blocks.end(),
                  [](const auto& b) { return b->local(); })) {
    blocks.local = layers::with_window(blocks.global, inputs, first, config_.window_size,
                                       sequence_parallelism());
  }
  x = h_.forward(chunk, x, blocks);
  return ends_model(chunk) ? step.join(ln_f_->forward(x, step.sequence.get())) : x;
}

}  // namespace shardformer::gpt_neo

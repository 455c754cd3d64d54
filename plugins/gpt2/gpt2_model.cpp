// GPT-2 forward pass, as in HF transformers' modeling_gpt2.py; tensor parallel where the policy
// says.
#include "gpt2_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/losses.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::gpt2 {
namespace {

void require(bool ok, const HFConfig& config, const std::string& what) {
  if (!ok) throw ModelError(str(config.path().string(), ": ", what));
}

}  // namespace

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
  g.activation = layers::parse_activation(c.get_string("activation_function", "gelu_new"),
                                          c.path().string() + ": activation_function");
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
  require(g.vocab_size > 0 && g.n_positions > 0 && g.n_embd > 0 && g.n_layer > 0 && g.n_head > 0 &&
              g.n_inner > 0,
          c, "vocab_size, n_positions, n_embd, n_layer, n_head and n_inner must be positive");
  require(g.n_embd % g.n_head == 0, c,
          str("n_embd (", g.n_embd, ") is not divisible by n_head (", g.n_head, ")"));
  require(!c.get_bool("add_cross_attention", false), c,
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
          layers::DropoutSlices{.dim = 1, .total = config.n_head, .first = first_head,
                                .count = num_heads_}));
  // After the row-parallel all-reduce the activation is replicated: one mask on every rank.
  resid_dropout_ = register_module(
      "resid_dropout",
      std::make_shared<layers::Dropout>(ctx.child("resid_dropout"), config.resid_pdrop));
  scale_ = config.scale_attn_weights ? 1.0 / std::sqrt(static_cast<double>(head_dim_)) : 1.0;
  if (config.scale_attn_by_inverse_layer_idx) scale_ /= static_cast<double>(layer_idx + 1);
}

at::Tensor GPT2Attention::forward(const at::Tensor& x, const at::Tensor& mask, KVCache* cache) {
  const int64_t batch = x.size(0), seq = x.size(1);
  // [batch, seq, heads/tp * head_dim] -> [batch, heads/tp, seq, head_dim]
  const auto heads = [&](const at::Tensor& t) {
    return t.view({batch, seq, num_heads_, head_dim_}).transpose(1, 2);
  };
  const std::vector<at::Tensor> qkv =
      c_attn_->forward(x).chunk(3, -1);  // 3 x [batch, seq, hidden/tp]
  at::Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  if (cache != nullptr) std::tie(k, v) = cache->append(layer_idx_, k, v);  // [.., past + seq, ..]
  at::Tensor out;  // [batch, heads/tp, seq, head_dim]
  if (upcast_ && q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble) {
    out = layers::scaled_dot_product_attention(q.to(at::kFloat), k.to(at::kFloat),
                                               v.to(at::kFloat), mask, scale_,
                                               attn_dropout_.get())
              .to(q.scalar_type());
  } else {
    out = layers::scaled_dot_product_attention(q, k, v, mask, scale_, attn_dropout_.get());
  }
  return resid_dropout_->forward(
      c_proj_->forward(out.transpose(1, 2).reshape({batch, seq, -1})));  // [batch, seq, hidden]
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

at::Tensor GPT2MLP::forward(const at::Tensor& x) {  // [batch, seq, hidden]
  const at::Tensor h = layers::apply_activation(activation_, c_fc_->forward(x));  // [.., inner/tp]
  return dropout_->forward(c_proj_->forward(h));                                  // [.., hidden]
}

GPT2Block::GPT2Block(const BuildContext& ctx, const GPT2Config& config, int64_t layer_idx) {
  ln_1_ = register_module("ln_1", layer_norm(ctx.child("ln_1"), config));
  attn_ = register_module("attn",
                          std::make_shared<GPT2Attention>(ctx.child("attn"), config, layer_idx));
  ln_2_ = register_module("ln_2", layer_norm(ctx.child("ln_2"), config));
  mlp_ = register_module("mlp", std::make_shared<GPT2MLP>(ctx.child("mlp"), config));
}

at::Tensor GPT2Block::forward(const at::Tensor& x, const at::Tensor& mask, KVCache* cache) {
  const at::Tensor h = x + attn_->forward(ln_1_->forward(x), mask, cache);
  return h + mlp_->forward(ln_2_->forward(h));
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
    drop_ = register_module("drop",
                            std::make_shared<layers::Dropout>(ctx.child("drop"), config.embd_pdrop));
  }
  // Blocks keep their global index as their name (h.5 on a stage holding layers 4 to 7).
  auto h = register_module("h", std::make_shared<torch::nn::Module>());
  const BuildContext h_ctx = ctx.child("h");
  for (const LayerRange& range : ctx.layer_ranges(config.n_layer)) {
    auto& chunk = chunks_.emplace_back();
    for (int64_t i = range.begin; i < range.end; ++i) {
      chunk.push_back(h->register_module(std::to_string(i),
                                         std::make_shared<GPT2Block>(h_ctx.child(i), config, i)));
    }
  }
  if (last) ln_f_ = register_module("ln_f", layer_norm(ctx.child("ln_f"), config));
}

ModelShape GPT2Model::shape() const {
  return ModelShape{.num_layers = config_.n_layer,
                    .num_heads = chunks_.front().front()->num_heads(),
                    .head_dim = config_.head_dim(),
                    .hidden_size = config_.n_embd,
                    .vocab_size = config_.vocab_size,
                    .max_positions = config_.n_positions};
}

at::Tensor GPT2Model::forward(const ForwardInputs& inputs) {
  const at::Tensor& ids = inputs.input_ids;  // [batch, seq]
  const int64_t batch = ids.size(0), seq = ids.size(1);
  if (inputs.chunk < 0 || inputs.chunk >= static_cast<int64_t>(chunks_.size())) {
    throw Error(str("GPT-2: chunk ", inputs.chunk, " requested from a stage of ", chunks_.size(),
                    " chunks"));
  }
  const auto& blocks = chunks_[inputs.chunk];
  const int64_t past = inputs.cache ? inputs.cache->length(blocks.front()->layer_idx()) : 0;
  at::Tensor positions = inputs.position_ids;
  if (!positions.defined()) {
    positions = at::arange(past, past + seq, ids.options()).unsqueeze(0);  // [1, seq]
  }
  const at::Tensor mask =
      layers::causal_attention_mask(inputs.attention_mask, batch, seq, past, ids.device());
  at::Tensor x;  // [batch, seq, hidden]
  if (starts_model(inputs.chunk)) {
    x = drop_->forward(wte_->forward(ids) + wpe_->forward(positions));
  } else {
    x = inputs.hidden_states;
    if (!x.defined()) throw Error("GPT-2 pipeline stage: no hidden_states from the previous stage");
  }
  for (const auto& block : blocks) x = block->forward(x, mask, inputs.cache);
  return ends_model(inputs.chunk) ? ln_f_->forward(x) : x;
}

GPT2LMHeadModel::GPT2LMHeadModel(const BuildContext& ctx, const GPT2Config& config)
    : parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  const bool tied = config.tie_word_embeddings;
  transformer_ = register_module(
      "transformer", std::make_shared<GPT2Model>(ctx.child("transformer"), config, tied));
  if (!ctx.builds_last_piece()) return;
  lm_head_ = tied ? layers::tied_lm_head(ctx, transformer_->token_embedding())
                  : register_module("lm_head", layers::make_lm_head(ctx.child("lm_head"),
                                                                    config.vocab_size, config.n_embd));
}

at::Tensor GPT2LMHeadModel::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = transformer_->forward(inputs);  // [batch, seq, hidden]
  if (!ends_model(inputs.chunk)) return hidden;
  return lm_head_->lm_logits(hidden, /*gather=*/true).logits;  // [batch, seq, vocab]
}

at::Tensor GPT2LMHeadModel::lm_loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("GPT-2: lm_loss runs on the last pipeline piece");
  if (!parallel_output_) return Model::lm_loss(inputs, labels);
  const at::Tensor hidden = transformer_->forward(inputs);  // [batch, seq, hidden]
  return causal_lm_loss(lm_head_->lm_logits(hidden, /*gather=*/false), labels);
}

}  // namespace shardformer::gpt2

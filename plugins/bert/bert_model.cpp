// BERT's config, embeddings, encoder layers and pooler, as in HF's modeling_bert.py.
#include "bert_model.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/layers/module_path.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::bert {

using layers::context_at;
using layers::register_at;
BertConfig BertConfig::from(const HFConfig& c) {
  BertConfig b{};
  const std::string type = c.model_type();
  c.require(type == "bert" || type == "roberta" || type == "ernie" || type == "albert",
            "model_type '" + type + "' is not bert, roberta, ernie or albert");
  b.roberta = type == "roberta";
  b.ernie = type == "ernie";
  b.albert = type == "albert";
  // ERNIE's task-type embeddings; the jobs pass no task-type ids, so every token gets task 0,
  // as HF gives it without them.
  b.task_type_vocab_size =
      b.ernie && c.get_bool("use_task_id", false) ? c.get_int("task_type_vocab_size", 3) : 0;
  if (b.ernie && b.task_type_vocab_size == 0) {
    c.ignore({"task_type_vocab_size"});  // sizes a table HF builds only with use_task_id
  }
  b.vocab_size = c.get_int("vocab_size");
  b.hidden_size = c.get_int("hidden_size");
  b.embedding_size = b.albert ? c.get_int("embedding_size", 128) : b.hidden_size;
  b.num_hidden_groups = b.albert ? c.get_int("num_hidden_groups", 1) : 1;
  b.inner_group_num = b.albert ? c.get_int("inner_group_num", 1) : 1;
  b.num_hidden_layers = c.get_int("num_hidden_layers");
  b.num_attention_heads = c.get_int("num_attention_heads");
  b.intermediate_size = c.get_int("intermediate_size");
  b.max_position_embeddings = c.get_int("max_position_embeddings");
  b.type_vocab_size = c.get_int("type_vocab_size", 2);
  b.pad_token_id = c.get_int("pad_token_id", b.roberta ? 1 : 0);
  b.layer_norm_eps = c.get_double("layer_norm_eps", 1e-12);
  b.hidden_dropout = c.get_probability("hidden_dropout_prob", b.albert ? 0.0 : 0.1);
  b.attention_dropout = c.get_probability("attention_probs_dropout_prob", b.albert ? 0.0 : 0.1);
  b.classifier_dropout = b.albert ? c.get_probability("classifier_dropout_prob", 0.1)
                                  : c.get_probability("classifier_dropout", b.hidden_dropout);
  b.hidden_act = layers::config_activation(c, "hidden_act", b.albert ? "gelu_new" : "gelu");
  b.tie_word_embeddings = c.get_bool("tie_word_embeddings", true);
  const std::optional<HFConfig> labels = c.get_object("id2label");
  b.num_labels = labels ? static_cast<int64_t>(labels->keys().size()) : 2;
  c.require(c.get_string("position_embedding_type", "absolute") == "absolute",
            "position_embedding_type other than \"absolute\" is not supported");
  c.require(!c.get_bool("is_decoder", false), "is_decoder = true (causal BERT) is not supported");
  c.require(!c.get_bool("add_cross_attention", false), "add_cross_attention is not supported");
  const std::string problem = c.get_string("problem_type", "single_label_classification");
  c.require(problem == "single_label_classification",
            str("problem_type '", problem, "' (only single_label_classification)"));
  c.require(b.hidden_size % b.num_attention_heads == 0,
            "hidden_size must divide by num_attention_heads");
  c.require(
      !b.roberta || b.max_position_embeddings > b.pad_token_id + 1,
      "max_position_embeddings must exceed pad_token_id + 1 (RoBERTa's positions start there)");
  return b;
}

layers::PostNormBlockOptions layer_options(const BertConfig& c) {
  layers::PostNormBlockOptions o{.hidden_size = c.hidden_size,
                                 .num_heads = c.num_attention_heads,
                                 .intermediate_size = c.intermediate_size,
                                 .activation = c.hidden_act,
                                 .layer_norm_eps = c.layer_norm_eps,
                                 .hidden_dropout = c.hidden_dropout,
                                 .attention_dropout = c.attention_dropout};
  if (c.albert) {  // AlbertLayer: attention.query ... attention.dense, ffn, ffn_output
    o.names = {.query = "query",
               .key = "key",
               .value = "value",
               .out = "dense",
               .attention_norm = "attention.LayerNorm",
               .attention_dropout = "attention.output_dropout",
               .intermediate = "ffn",
               .output = "ffn_output",
               .output_norm = "full_layer_layer_norm",
               .output_dropout = "dropout"};
  }
  return o;
}

BertModel::BertModel(const BuildContext& ctx, const BertConfig& c, bool pooler,
                     bool embedding_on_last_stage)
    : config_(c) {
  bind(ctx);
  const bool first = ctx.builds_first_piece(), last = ctx.builds_last_piece();
  auto embeddings = register_module("embeddings", std::make_shared<torch::nn::Module>());
  const BuildContext e = ctx.child("embeddings");
  const int64_t dim = c.embedding_size;  // ALBERT's factorized embeddings; hidden_size otherwise
  const auto embedding = [&](const char* name, int64_t rows) {
    return embeddings->register_module(name, layers::make_embedding(e.child(name), rows, dim));
  };
  if (first || (embedding_on_last_stage && last)) {
    word_embeddings_ = embedding("word_embeddings", c.vocab_size);
    word_embeddings_->set_padding_idx(c.pad_token_id);
  }
  if (first) {
    position_embeddings_ = embedding("position_embeddings", c.max_position_embeddings);
    if (c.roberta) position_embeddings_->set_padding_idx(c.pad_token_id);
    if (c.task_type_vocab_size > 0) {
      task_type_embeddings_ = embedding("task_type_embeddings", c.task_type_vocab_size);
    }
    token_type_embeddings_ = embedding("token_type_embeddings", c.type_vocab_size);
    embeddings_norm_ = embeddings->register_module(
        "LayerNorm",
        std::make_shared<layers::LayerNorm>(e.child("LayerNorm"), dim, c.layer_norm_eps));
    embeddings_dropout_ = embeddings->register_module(
        "dropout", std::make_shared<layers::Dropout>(e.child("dropout"), c.hidden_dropout));
  }
  e.skip("position_ids", "a buffer of arange positions in older checkpoints");
  e.skip("token_type_ids", "a buffer of zeros in older checkpoints");
  if (c.albert) {
    if (!first || !last) {
      throw ModelError(str(ctx.path(), ": ALBERT runs its shared layers at every depth, so a ",
                           "pipeline cannot split them; run it with pp = 1"));
    }
    const std::string mapping = "encoder.embedding_hidden_mapping_in";
    embedding_hidden_mapping_in_ = register_at(
        *this, mapping, layers::make_linear(context_at(ctx, mapping), dim, c.hidden_size));
    for (int64_t g = 0; g < c.num_hidden_groups; ++g) {
      auto& group = groups_.emplace_back();
      for (int64_t j = 0; j < c.inner_group_num; ++j) {
        const std::string path = str("encoder.albert_layer_groups.", g, ".albert_layers.", j);
        group.push_back(register_at(*this, path,
                                    std::make_shared<layers::PostNormEncoderBlock>(
                                        context_at(ctx, path), layer_options(c), j)));
      }
    }
  } else {
    auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>());
    layers_ = layers::LayerStack<layers::PostNormEncoderBlock>(
        *encoder, ctx.child("encoder"), "layer", c.num_hidden_layers,
        [&](const auto& layer_ctx, int64_t i) {
          return std::make_shared<layers::PostNormEncoderBlock>(layer_ctx, layer_options(c), i);
        });
  }
  if (pooler && last) {
    // ALBERT's pooler is the linear layer itself; BERT's holds it as pooler.dense.
    const std::string path = c.albert ? "pooler" : "pooler.dense";
    pooler_ = register_at(*this, path,
                          layers::make_linear(context_at(ctx, path), c.hidden_size, c.hidden_size));
  } else if (!pooler) {
    ctx.skip_module("pooler", "this class has no pooler");
  }
}

at::Tensor BertModel::run_groups(at::Tensor x, const layers::EncoderDecoderStep& step) const {
  // HF: layer i runs group int(i / (layers / groups)), each group all of its inner layers.
  const double per_group = static_cast<double>(config_.num_hidden_layers) /
                           static_cast<double>(config_.num_hidden_groups);
  for (int64_t i = 0; i < config_.num_hidden_layers; ++i) {
    const auto g = static_cast<size_t>(static_cast<double>(i) / per_group);
    for (const auto& layer : groups_[g]) x = layer->forward(x, step);
  }
  return x;
}

ModelShape BertModel::shape() const {
  return ModelShape{
      .num_layers = config_.num_hidden_layers,
      .num_heads = config_.num_attention_heads,
      .head_dim = config_.hidden_size / config_.num_attention_heads,
      .hidden_size = config_.hidden_size,
      .vocab_size = config_.vocab_size,
      // RoBERTa's positions start past pad_token_id
      .max_positions = config_.roberta ? config_.max_position_embeddings - config_.pad_token_id - 1
                                       : config_.max_position_embeddings};
}

at::Tensor BertModel::forward(const ForwardInputs& inputs) {
  const int64_t chunk = inputs.chunk;
  const layers::ForwardStep step = layers::forward_step(
      inputs, config_.albert ? 0 : layers_.first_layer(chunk), {.causal = false});
  at::Tensor x;  // [batch, seq, hidden]
  if (starts_model(chunk)) {
    const at::Tensor types =
        inputs.token_type_ids.defined() ? inputs.token_type_ids : at::zeros_like(inputs.input_ids);
    x = word_embeddings_->forward(inputs.input_ids) + token_type_embeddings_->forward(types);
    // RoBERTa (fairseq): each real token's position is pad_token_id + its count of real
    // tokens so far; padding sits at pad_token_id itself.
    const at::Tensor positions =
        config_.roberta ? [&] {
          const at::Tensor real = inputs.input_ids.ne(config_.pad_token_id).to(at::kLong);
          return real.cumsum(1) * real + config_.pad_token_id;  // [batch, seq]
        }()
                        : step.positions;
    x = x + position_embeddings_->forward(positions);
    if (task_type_embeddings_) {  // ERNIE: task 0 for every token
      x = x + task_type_embeddings_->forward(at::zeros_like(inputs.input_ids));
    }
    x = embeddings_dropout_->forward(embeddings_norm_->forward(x));
  } else {
    x = layers::stage_input(inputs);
  }
  const layers::EncoderDecoderStep layer_step{.self = {.mask = step.mask}};
  if (config_.albert) return run_groups(embedding_hidden_mapping_in_->forward(x), layer_step);
  return layers_.forward(chunk, x, layer_step);
}

at::Tensor BertModel::pool(const at::Tensor& hidden) const {
  if (!pooler_) throw Error("this BERT stage has no pooler");
  return at::tanh(pooler_->forward(hidden.select(1, 0)));  // [batch, hidden]
}

std::map<std::string, at::Tensor> BertModel::forward_all(const ForwardInputs& inputs) {
  const at::Tensor hidden = forward(inputs);
  if (!ends_model(inputs.chunk) || !pooler_) return {{"last_hidden_state", hidden}};
  return {{"last_hidden_state", hidden}, {"pooler_output", pool(hidden)}};
}

}  // namespace shardformer::bert

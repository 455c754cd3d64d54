// BERT (HF BertModel, BertForMaskedLM, BertForSequenceClassification) with SDK blocks: absolute
// position and token-type embeddings, post-LayerNorm encoder layers with bidirectional attention
// over padding masks, the pooler, the MLM head tied to the word embeddings and a classifier.
// RoBERTa is the same network under its own names: positions counted past pad_token_id from the
// ids, lm_head for cls.predictions, and a two-layer classification head instead of the pooler.
// ERNIE is BERT under "ernie" with task-type embeddings (use_task_id) added to the input. ALBERT
// is BERT's layer under other names, with embeddings of embedding_size projected to the hidden
// size and layers shared: num_hidden_groups groups of inner_group_num layers, each group run
// by num_hidden_layers / num_hidden_groups consecutive layers (tp splits them once; pp refused).
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/layer_stack.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/masked_lm_head.h"
#include "shardformer/layers/post_norm_block.h"
#include "shardformer/model.h"

#include <memory>
#include <string>
#include <vector>

namespace shardformer::bert {

struct BertConfig {
  bool roberta;  // model_type roberta: RoBERTa's positions, names and heads
  bool ernie;    // model_type ernie: BERT under "ernie", task-type embeddings with use_task_id
  bool albert;   // model_type albert: factorized embeddings, shared layers, ALBERT's names
  int64_t embedding_size;                      // ALBERT's; hidden_size otherwise
  int64_t num_hidden_groups, inner_group_num;  // ALBERT's layer sharing; 1 and 1 otherwise
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  int64_t max_position_embeddings, type_vocab_size, pad_token_id, num_labels;
  int64_t task_type_vocab_size;  // ERNIE with use_task_id (0: no task-type embeddings)
  double layer_norm_eps, hidden_dropout, attention_dropout, classifier_dropout;
  layers::Activation hidden_act;
  bool tie_word_embeddings;

  static BertConfig from(const HFConfig& config);
  // HF's base-model prefix and the architectures' class-name prefix
  std::string base_name() const {
    return roberta ? "roberta" : ernie ? "ernie" : albert ? "albert" : "bert";
  }
  std::string class_prefix() const {
    return roberta ? "Roberta" : ernie ? "Ernie" : albert ? "Albert" : "Bert";
  }
};

// The options of BERT's encoder layer (layers::PostNormEncoderBlock) under BERT's, RoBERTa's and
// ERNIE's names, or ALBERT's.
layers::PostNormBlockOptions layer_options(const BertConfig& config);

// HF BertModel: its outputs are the last hidden state and (with the pooler) the pooler output.
class BertModel : public Model {
 public:
  BertModel(const BuildContext& ctx, const BertConfig& config, bool pooler,
            bool embedding_on_last_stage);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, hidden]
  std::map<std::string, at::Tensor> forward_all(const ForwardInputs& inputs) override;
  ModelShape shape() const override;
  std::string output_name() const override { return "last_hidden_state"; }
  // tanh(dense(hidden[:, 0])): [batch, seq, hidden] -> [batch, hidden]
  at::Tensor pool(const at::Tensor& hidden) const;
  const std::shared_ptr<layers::Embedding>& word_embeddings() const { return word_embeddings_; }

 private:
  BertConfig config_;
  std::shared_ptr<layers::Embedding> word_embeddings_, position_embeddings_, token_type_embeddings_;
  std::shared_ptr<layers::Embedding> task_type_embeddings_;      // ERNIE with use_task_id
  std::shared_ptr<layers::Linear> embedding_hidden_mapping_in_;  // ALBERT: embedding -> hidden
  std::vector<std::vector<std::shared_ptr<layers::PostNormEncoderBlock>>>
      groups_;  // ALBERT's shared layers
  std::shared_ptr<layers::LayerNorm> embeddings_norm_;
  std::shared_ptr<layers::Dropout> embeddings_dropout_;
  layers::LayerStack<layers::PostNormEncoderBlock> layers_;
  std::shared_ptr<layers::Linear> pooler_;
  // x [batch, seq, hidden] through ALBERT's groups: layer i runs group i * groups / layers.
  at::Tensor run_groups(at::Tensor x, const layers::EncoderDecoderStep& step) const;
};

// BertForMaskedLM: BertModel under "bert" (no pooler) and cls.predictions: transform (dense,
// activation, LayerNorm) and the decoder tied to the word embeddings with a bias of its own.
// RobertaForMaskedLM: the same under "roberta" and lm_head (dense, GELU, layer_norm, decoder).
class BertForMaskedLM : public Model {
 public:
  BertForMaskedLM(const BuildContext& ctx, const BertConfig& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, vocab]
  ModelShape shape() const override { return bert_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kMaskedLM; }
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels) override;

 private:
  layers::VocabLogits logits(const ForwardInputs& inputs, layers::LogitsGather gather);

  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<layers::MaskedLmHead> head_;  // cls.predictions, lm_head or predictions
  bool parallel_output_;
};

// BertForSequenceClassification: the pooled output through dropout and a replicated classifier
// (num_labels rarely divides by tp). RobertaForSequenceClassification: no pooler; the first
// token through dropout, classifier.dense, tanh, dropout and classifier.out_proj.
class BertForSequenceClassification : public Model {
 public:
  BertForSequenceClassification(const BuildContext& ctx, const BertConfig& config);
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, num_labels]
  ModelShape shape() const override { return bert_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kSequenceClassification; }

 private:
  std::shared_ptr<BertModel> bert_;
  std::shared_ptr<layers::Dropout> dropout_;
  std::shared_ptr<layers::Linear> dense_;       // RoBERTa's classifier.dense (null for BERT)
  std::shared_ptr<layers::Linear> classifier_;  // BERT's classifier, RoBERTa's out_proj
};

}  // namespace shardformer::bert

// BERT's and RoBERTa's task heads: masked-LM (the decoder tied to the word embeddings, or
// untied) and sequence classification.
#include "bert_model.h"

#include "shardformer/layers/module_path.h"

#include "shardformer/error.h"
#include "shardformer/losses.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::bert {

using layers::context_at;
using layers::register_at;

namespace {

// Where BERT's, RoBERTa's and ALBERT's masked-LM heads sit, and the transform's names under them.
struct MLMHeadNames {
  std::string head, dense, norm;
};

MLMHeadNames mlm_head_names(const BertConfig& c) {
  if (c.roberta) return {"lm_head", "dense", "layer_norm"};
  if (c.albert) return {"predictions", "dense", "LayerNorm"};
  return {"cls.predictions", "transform.dense", "transform.LayerNorm"};
}

}  // namespace

BertForMaskedLM::BertForMaskedLM(const BuildContext& ctx, const BertConfig& c)
    : parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  const std::string base = c.base_name();
  bert_ = register_module(
      base, std::make_shared<BertModel>(ctx.child(base), c, false, c.tie_word_embeddings));
  ctx.skip_module("classifier", "a masked-LM model has no classifier");
  ctx.child("cls").skip_module("seq_relationship", "the next-sentence head of pre-training");
  ctx.skip_module("sop_classifier", "ALBERT's sentence-order head of pre-training");
  if (!ctx.builds_last_piece()) return;
  const MLMHeadNames names = mlm_head_names(c);
  head_ = register_at(
      *this, names.head,
      std::make_shared<layers::MaskedLmHead>(
          context_at(ctx, names.head),
          layers::MaskedLmHeadOptions{
              .hidden_size = c.hidden_size,
              .embedding_size = c.embedding_size,
              .vocab_size = c.vocab_size,
              .activation = c.roberta ? layers::Activation::kGelu : c.hidden_act,  // RoBERTa: erf
              .layer_norm_eps = c.layer_norm_eps,
              .dense_name = names.dense,
              .norm_name = names.norm,
              .tied = c.tie_word_embeddings ? bert_->word_embeddings() : nullptr}));
}

layers::VocabLogits BertForMaskedLM::logits(const ForwardInputs& inputs,
                                            layers::LogitsGather gather) {
  return head_->forward(bert_->forward(inputs), gather);  // [batch, seq, hidden] -> vocab
}

at::Tensor BertForMaskedLM::forward(const ForwardInputs& inputs) {
  if (!ends_model(inputs.chunk)) return bert_->forward(inputs);
  const auto gather = inputs.logits_on_first_tp_rank ? layers::LogitsGather::kFirstRank
                                                     : layers::LogitsGather::kAll;
  return logits(inputs, gather).logits;  // [batch, seq, vocab]
}

at::Tensor BertForMaskedLM::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("the loss runs on the last pipeline piece");
  return cross_entropy_loss(
      logits(inputs, parallel_output_ ? layers::LogitsGather::kNone : layers::LogitsGather::kAll),
      labels);
}

BertForSequenceClassification::BertForSequenceClassification(const BuildContext& ctx,
                                                             const BertConfig& c) {
  bind(ctx);
  const std::string base = c.base_name();
  bert_ = register_module(base, std::make_shared<BertModel>(ctx.child(base), c, !c.roberta, false));
  ctx.skip_module(c.roberta  ? "lm_head"
                  : c.albert ? "predictions"
                             : "cls",
                  "the pre-training heads");
  ctx.skip_module("sop_classifier", "ALBERT's sentence-order head of pre-training");
  if (!ctx.builds_last_piece()) return;
  if (!c.roberta) {
    dropout_ = register_module(
        "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.classifier_dropout));
    classifier_ = register_module(
        "classifier", layers::make_linear(ctx.child("classifier"), c.hidden_size, c.num_labels));
    return;
  }
  const BuildContext head = ctx.child("classifier");
  auto head_module = register_module("classifier", std::make_shared<torch::nn::Module>());
  dense_ = head_module->register_module(
      "dense", layers::make_linear(head.child("dense"), c.hidden_size, c.hidden_size));
  dropout_ = head_module->register_module(
      "dropout", std::make_shared<layers::Dropout>(head.child("dropout"), c.classifier_dropout));
  classifier_ = head_module->register_module(
      "out_proj", layers::make_linear(head.child("out_proj"), c.hidden_size, c.num_labels));
}

at::Tensor BertForSequenceClassification::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = bert_->forward(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  if (!dense_) {
    return classifier_->forward(dropout_->forward(bert_->pool(hidden)));  // [batch, labels]
  }
  // RoBERTa: the first token (<s>), dropout, dense, tanh, dropout, out_proj.
  const at::Tensor first = dropout_->forward(hidden.select(1, 0));  // [batch, hidden]
  return classifier_->forward(dropout_->forward(at::tanh(dense_->forward(first))));
}

}  // namespace shardformer::bert

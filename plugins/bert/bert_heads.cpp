// BERT's task heads: masked-LM (the decoder tied to the word embeddings, or untied) and sequence
// classification.
#include "bert_model.h"

#include "shardformer/error.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/losses.h"

#include <ATen/ATen.h>

namespace shardformer::bert {

BertForMaskedLM::BertForMaskedLM(const BuildContext& ctx, const BertConfig& c)
    : act_(c.hidden_act),
      parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  bert_ = register_module(
      "bert", std::make_shared<BertModel>(ctx.child("bert"), c, false, c.tie_word_embeddings));
  ctx.skip_module("classifier", "BertForMaskedLM has no classifier");
  ctx.child("cls").skip_module("seq_relationship", "the next-sentence head of pre-training");
  if (!ctx.builds_last_piece()) return;
  const BuildContext predictions = ctx.child("cls").child("predictions");
  const BuildContext transform = predictions.child("transform");
  auto cls = register_module("cls", std::make_shared<torch::nn::Module>());
  auto p = cls->register_module("predictions", std::make_shared<torch::nn::Module>());
  auto t = p->register_module("transform", std::make_shared<torch::nn::Module>());
  transform_ = t->register_module(
      "dense", layers::make_linear(transform.child("dense"), c.hidden_size, c.hidden_size));
  transform_norm_ = t->register_module(
      "LayerNorm", std::make_shared<layers::LayerNorm>(transform.child("LayerNorm"), c.hidden_size,
                                                       c.layer_norm_eps));
  const BuildContext decoder = predictions.child("decoder");
  if (c.tie_word_embeddings) {
    decoder_ = layers::tied_lm_head(decoder, bert_->word_embeddings());
    decoder.skip("bias", "the same tensor as cls.predictions.bias");
    bias_ = p->register_parameter("bias",
                                  predictions.load("bias", {c.vocab_size}, decoder_->bias_shard()));
    return;
  }
  // Untied (tie_word_embeddings = false): the decoder's own weight and bias, as HF computes it;
  // HF's forward then never reads cls.predictions.bias.
  decoder_ =
      p->register_module("decoder", layers::make_lm_head(decoder, c.vocab_size, c.hidden_size));
  bias_ = decoder_->register_parameter(
      "bias", decoder.load("bias", {c.vocab_size}, decoder_->bias_shard()));
  predictions.skip("bias", "HF's untied decoder adds cls.predictions.decoder.bias instead");
}

layers::VocabLogits BertForMaskedLM::logits(const ForwardInputs& inputs,
                                            layers::LogitsGather gather) {
  const at::Tensor hidden = bert_->forward(inputs);  // [batch, seq, hidden]
  const at::Tensor h =
      transform_norm_->forward(layers::apply_activation(act_, transform_->forward(hidden)));
  return decoder_->lm_logits(h, gather, bias_);
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
  bert_ = register_module("bert", std::make_shared<BertModel>(ctx.child("bert"), c, true, false));
  ctx.skip_module("cls", "the pre-training heads");
  if (!ctx.builds_last_piece()) return;
  dropout_ = register_module(
      "dropout", std::make_shared<layers::Dropout>(ctx.child("dropout"), c.classifier_dropout));
  classifier_ = register_module(
      "classifier", layers::make_linear(ctx.child("classifier"), c.hidden_size, c.num_labels));
}

at::Tensor BertForSequenceClassification::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = bert_->forward(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  return classifier_->forward(dropout_->forward(bert_->pool(hidden)));  // [batch, num_labels]
}

}  // namespace shardformer::bert

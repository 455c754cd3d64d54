// The masked-LM head of BERT-style encoders (BERT's cls.predictions, RoBERTa's lm_head, ALBERT's
// predictions): a transform (dense, activation, LayerNorm) and a decoder over the vocabulary, tied
// to the word embeddings or with a weight of its own, plus the head's bias.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

struct MaskedLmHeadOptions {
  int64_t hidden_size = 0;
  int64_t embedding_size = 0;  // the transform's output and the decoder's input (ALBERT's)
  int64_t vocab_size = 0;
  Activation activation = Activation::kGelu;
  double layer_norm_eps = 1e-12;
  // The transform's modules under the head (RoBERTa's "dense" / "layer_norm").
  std::string dense_name = "transform.dense", norm_name = "transform.LayerNorm";
  // The word embeddings the decoder shares (tie_word_embeddings), or null: decoder.weight.
  std::shared_ptr<Embedding> tied;
};

class MaskedLmHead : public torch::nn::Module {
 public:
  // ctx: the head's module ("cls.predictions"). Tied, the checkpoint's decoder.weight and
  // decoder.bias copies are declared unused and the head's bias is read; untied, the decoder's
  // own weight and bias are read (HF's forward then never reads the head's bias).
  MaskedLmHead(const BuildContext& ctx, const MaskedLmHeadOptions& options);
  // hidden [batch, seq, hidden] -> logits [batch, seq, vocab] (vocab-parallel as `gather` says)
  VocabLogits forward(const at::Tensor& hidden, LogitsGather gather);

 private:
  Activation activation_;
  std::shared_ptr<Linear> dense_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Embedding> decoder_;
  at::Tensor bias_;  // [vocab(/tp)], split like the decoder's rows
};

}  // namespace shardformer::layers

// HF's ...ForCausalLM shape, written once: a base model under HF's base-model prefix ("model",
// "transformer") and, on the stage holding the model's last piece, an LM head tied to the
// base's token embedding or with lm_head.weight of its own. Logits come gathered over tp; the
// loss uses vocab-parallel cross-entropy on each rank's slice when ShardConfig::parallel_output.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/model.h"

#include <memory>
#include <string>

namespace shardformer {

// The LM head's HF module name and whether it adds a bias of its own (an untied head only).
struct LMHeadOptions {
  std::string name = "lm_head";  // GPT-NeoX: embed_out
  bool bias = false;             // GPT-J: lm_head.bias [vocab]
};

class CausalLM : public Model {
 public:
  // base: built from ctx.child(base_name), holding its token embedding on the last stage too
  // when tied; token_embedding: that embedding (null where the base holds none).
  CausalLM(const BuildContext& ctx, const std::string& base_name, std::shared_ptr<Model> base,
           std::shared_ptr<layers::Embedding> token_embedding, bool tied, int64_t vocab_size,
           int64_t hidden_size, const LMHeadOptions& head = {});

  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, seq, vocab]
  ModelShape shape() const override { return base_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kCausalLM; }
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels) override;

  Model& base() const { return *base_; }

 private:
  std::shared_ptr<Model> base_;
  std::shared_ptr<layers::Embedding> lm_head_;  // the token embedding when tied
  at::Tensor head_bias_;                        // [vocab], split as lm_head_'s rows; or none
  bool parallel_output_;
};

}  // namespace shardformer

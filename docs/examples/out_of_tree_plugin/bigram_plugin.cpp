// Example plugin: a bigram language model ("BigramLM": logits = wte[ids] @ lm_head^T) written
// against the installed SDK — the smallest complete model family.
#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/linear.h"
#include "shardformer/model_builder.h"
#include "shardformer/plugin.h"

#include <ATen/ATen.h>

namespace example {

class BigramLM : public shardformer::Model {
 public:
  explicit BigramLM(const shardformer::BuildContext& ctx)
      : vocab_(ctx.config().get_int("vocab_size")), hidden_(ctx.config().get_int("hidden_size")) {
    bind(ctx);  // records the sharding plan and the tensors read (the host checks them all)
    wte_ = register_module("wte",
                           shardformer::layers::make_embedding(ctx.child("wte"), vocab_, hidden_));
    lm_head_ = register_module("lm_head", shardformer::layers::make_linear(
                                              ctx.child("lm_head"), hidden_, vocab_,
                                              shardformer::layers::LinearOptions{.bias = false}));
  }
  at::Tensor forward(const shardformer::ForwardInputs& inputs) override {
    return lm_head_->forward(wte_->forward(inputs.input_ids));  // [batch, seq, vocab]
  }
  shardformer::ModelShape shape() const override {
    return {.num_layers = 0, .hidden_size = hidden_, .vocab_size = vocab_};
  }
  std::string output_name() const override { return "logits"; }
  shardformer::ModelTask task() const override { return shardformer::ModelTask::kCausalLM; }

 private:
  int64_t vocab_, hidden_;
  std::shared_ptr<shardformer::layers::Embedding> wte_;
  std::shared_ptr<shardformer::layers::Linear> lm_head_;
};

class BigramFamily : public shardformer::ModelFamily {
 public:
  std::string name() const override { return "bigram"; }
  std::string version() const override { return "1.0.0"; }
  std::string description() const override { return "example out-of-tree plugin"; }
  std::vector<std::string> architectures() const override { return {"BigramLM"}; }
  std::shared_ptr<shardformer::Model> create(const shardformer::ModelArgs& args) const override {
    // Tensor parallel as Megatron splits it: the vocabulary of wte, the columns of lm_head.
    const shardformer::Policy policy(
        {{"wte", {.kind = shardformer::ShardKind::kVocab}},
         {"lm_head", {.kind = shardformer::ShardKind::kColumn, .gather_output = true}}});
    const shardformer::ModelBuilder builder(args, policy, "");
    return builder.finish(std::make_shared<BigramLM>(builder.context()));
  }
};

}  // namespace example

SHARDFORMER_PLUGIN(example::BigramFamily)

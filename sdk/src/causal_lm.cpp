// A base model plus its LM head, tied or untied, with the vocab-parallel loss.
#include "shardformer/causal_lm.h"

#include "shardformer/error.h"
#include "shardformer/layers/forward_step.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/losses.h"
#include "shardformer/strings.h"

namespace shardformer {

CausalLM::CausalLM(const BuildContext& ctx, const std::string& base_name,
                   std::shared_ptr<Model> base, std::shared_ptr<layers::Embedding> token_embedding,
                   bool tied, int64_t vocab_size, int64_t hidden_size, const LMHeadOptions& head)
    : parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  base_ = register_module(base_name, std::move(base));
  if (tied && head.bias) {
    throw ModelError(str(ctx.path(), ": a tied LM head with a bias of its own is not supported"));
  }
  if (!ctx.builds_last_piece()) return;
  const BuildContext head_ctx = ctx.child(head.name);
  lm_head_ =
      tied ? layers::tied_lm_head(head_ctx, std::move(token_embedding))
           : register_module(head.name, layers::make_lm_head(head_ctx, vocab_size, hidden_size));
  if (head.bias) {
    head_bias_ = lm_head_->register_parameter(
        "bias", head_ctx.load("bias", {vocab_size}, lm_head_->bias_shard()));
  }
}

at::Tensor CausalLM::forward(const ForwardInputs& inputs) {
  at::Tensor hidden = base_->forward(inputs);  // [batch, seq, hidden]
  if (!ends_model(inputs.chunk)) return hidden;
  hidden = layers::kept_positions(hidden, inputs);  // [batch, seq or keep, hidden]
  const auto gather = inputs.logits_on_first_tp_rank ? layers::LogitsGather::kFirstRank
                                                     : layers::LogitsGather::kAll;
  return lm_head_->lm_logits(hidden, gather, head_bias_).logits;  // [batch, seq or keep, vocab]
}

at::Tensor CausalLM::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("loss runs on the last pipeline piece");
  if (!parallel_output_) return Model::loss(inputs, labels);
  const at::Tensor hidden = base_->forward(inputs);  // [batch, seq, hidden]
  return causal_lm_loss(lm_head_->lm_logits(hidden, layers::LogitsGather::kNone, head_bias_),
                        labels);
}

}  // namespace shardformer

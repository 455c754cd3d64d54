// A base model plus its LM head, tied or untied, with the vocab-parallel loss.
#include "shardformer/causal_lm.h"

#include "shardformer/error.h"
#include "shardformer/layers/lm_head.h"
#include "shardformer/losses.h"

namespace shardformer {

CausalLM::CausalLM(const BuildContext& ctx, const std::string& base_name,
                   std::shared_ptr<Model> base, std::shared_ptr<layers::Embedding> token_embedding,
                   bool tied, int64_t vocab_size, int64_t hidden_size)
    : parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
  base_ = register_module(base_name, std::move(base));
  if (!ctx.builds_last_piece()) return;
  lm_head_ = tied ? layers::tied_lm_head(ctx.child("lm_head"), std::move(token_embedding))
                  : register_module("lm_head", layers::make_lm_head(ctx.child("lm_head"),
                                                                    vocab_size, hidden_size));
}

at::Tensor CausalLM::forward(const ForwardInputs& inputs) {
  at::Tensor hidden = base_->forward(inputs);  // [batch, seq, hidden]
  if (!ends_model(inputs.chunk)) return hidden;
  const int64_t seq = hidden.size(1);
  if (inputs.logits_to_keep > 0 && inputs.logits_to_keep < seq) {  // [batch, keep, hidden]
    hidden = hidden.narrow(1, seq - inputs.logits_to_keep, inputs.logits_to_keep).contiguous();
  }
  const auto gather = inputs.logits_on_first_tp_rank ? layers::LogitsGather::kFirstRank
                                                     : layers::LogitsGather::kAll;
  return lm_head_->lm_logits(hidden, gather).logits;  // [batch, seq or keep, vocab]
}

at::Tensor CausalLM::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("loss runs on the last pipeline piece");
  if (!parallel_output_) return Model::loss(inputs, labels);
  const at::Tensor hidden = base_->forward(inputs);  // [batch, seq, hidden]
  return causal_lm_loss(lm_head_->lm_logits(hidden, layers::LogitsGather::kNone), labels);
}

}  // namespace shardformer

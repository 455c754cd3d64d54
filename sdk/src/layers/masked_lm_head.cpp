// The masked-LM head's modules and logits.
#include "shardformer/layers/masked_lm_head.h"

#include "shardformer/layers/lm_head.h"
#include "shardformer/layers/module_path.h"

namespace shardformer::layers {

MaskedLmHead::MaskedLmHead(const BuildContext& ctx, const MaskedLmHeadOptions& o)
    : activation_(o.activation) {
  dense_ = register_at(*this, o.dense_name,
                       make_linear(context_at(ctx, o.dense_name), o.hidden_size, o.embedding_size));
  norm_ = register_at(*this, o.norm_name,
                      std::make_shared<LayerNorm>(context_at(ctx, o.norm_name), o.embedding_size,
                                                  o.layer_norm_eps));
  const BuildContext decoder = ctx.child("decoder");
  if (o.tied) {
    decoder_ = tied_lm_head(decoder, o.tied);
    decoder.skip("bias", "the same tensor as the head's bias");
    bias_ = register_parameter("bias", ctx.load("bias", {o.vocab_size}, decoder_->bias_shard()));
  } else {
    decoder_ = register_module("decoder", make_lm_head(decoder, o.vocab_size, o.embedding_size));
    bias_ = decoder_->register_parameter(
        "bias", decoder.load("bias", {o.vocab_size}, decoder_->bias_shard()));
    ctx.skip("bias", "HF's untied decoder adds decoder.bias instead");
  }
}

VocabLogits MaskedLmHead::forward(const at::Tensor& hidden, LogitsGather gather) {
  const at::Tensor h = norm_->forward(apply_activation(activation_, dense_->forward(hidden)));
  return decoder_->lm_logits(h, gather, bias_);  // [batch, seq, embedding] -> logits
}

}  // namespace shardformer::layers

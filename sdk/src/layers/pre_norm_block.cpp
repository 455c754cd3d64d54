// The pre-norm residual block's pass (ViT and BEiT, Whisper, T5): the order of its sublayers
// and where each residual sum meets the next norm.
#include "shardformer/layers/pre_norm_block.h"

#include "shardformer/error.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/rms_norm.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

namespace {

// The block's first norm, or a layer-scaled branch's: the norm alone, no residual to add.
at::Tensor apply_norm(const ResidualNorm& norm, const at::Tensor& x) {
  switch (norm.kind()) {
    case ResidualNorm::Kind::kLayerNorm: return static_cast<const LayerNorm&>(norm).forward(x);
    case ResidualNorm::Kind::kRMSNorm: return static_cast<const RMSNorm&>(norm).forward(x);
  }
  throw ModelError("pre_norm_block: a norm of unknown kind");
}

void check(const PreNormSublayers& s) {
  if (s.self_norm == nullptr || s.self_attn == nullptr || s.ff_norm == nullptr ||
      (s.mlp == nullptr) == (s.gated_mlp == nullptr) ||
      (s.cross_attn == nullptr) != (s.cross_norm == nullptr) ||
      s.self_scale.defined() != s.ff_scale.defined() ||
      ((s.self_scale.defined() || s.drop_path != nullptr) && s.cross_attn != nullptr)) {
    throw ModelError(
        "pre_norm_block: a block needs self_norm, self_attn, ff_norm and one of mlp and "
        "gated_mlp; cross_norm with cross_attn; layer scale on both branches and stochastic "
        "depth of an encoder block only");
  }
}

}  // namespace

at::Tensor sublayer_dropout(Dropout* dropout, const at::Tensor& x) {
  return dropout != nullptr ? dropout->forward(x) : x;
}

at::Tensor pre_norm_block(const PreNormSublayers& s, const at::Tensor& x,
                          const EncoderDecoderStep& step) {
  check(s);
  const auto feed_forward = [&](const at::Tensor& normed) {
    return s.mlp != nullptr ? s.mlp->forward(normed) : s.gated_mlp->forward(normed);
  };
  if (s.self_scale.defined() || (s.drop_path != nullptr && s.drop_path->active())) {
    // BEiT: the layer scale and the stochastic depth sit between each branch and its residual.
    const auto branch = [&](const at::Tensor& scale, Dropout* dropout, const at::Tensor& out) {
      const at::Tensor dropped = sublayer_dropout(dropout, out);
      const at::Tensor scaled = scale.defined() ? scale * dropped : dropped;
      return s.drop_path != nullptr ? s.drop_path->forward(scaled) : scaled;
    };
    const at::Tensor h = x + branch(s.self_scale, s.self_dropout,
                                    s.self_attn->forward(apply_norm(*s.self_norm, x), step.self));
    return h + branch(s.ff_scale, s.ff_dropout, feed_forward(apply_norm(*s.ff_norm, h)));
  }
  const ResidualNorm* after_self = s.cross_attn != nullptr ? s.cross_norm : s.ff_norm;
  ResidualSum h = s.self_attn->forward_residual(apply_norm(*s.self_norm, x), step.self, x,
                                                after_self, s.self_dropout);
  if (s.cross_attn != nullptr) {
    h = s.cross_attn->forward_residual(h.normed, step.memory, step.memory_mask, step.cross_cache,
                                       h.sum, s.ff_norm, s.cross_dropout);
  }
  return s.mlp != nullptr
             ? s.mlp->forward_residual(h.normed, h.sum, nullptr, s.ff_dropout).sum
             : s.gated_mlp->forward_residual(h.normed, h.sum, nullptr, s.ff_dropout).sum;
}

}  // namespace shardformer::layers

// The relative position table's index (HF's relative_position_index for BEiT and Swin) and its
// gather into a bias.
#include "shardformer/layers/relative_position_table.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

RelativePositionTable::RelativePositionTable(const BuildContext& ctx,
                                             const RelativePositionTableOptions& o, bool split) {
  const auto [wh, ww] = o.window;
  if (wh <= 0 || ww <= 0 || o.num_heads <= 0) {
    throw ModelError(
        str("relative position table of a ", wh, " x ", ww, " window and ", o.num_heads, " heads"));
  }
  const int64_t patches = wh * ww;
  const int64_t offsets = (2 * wh - 1) * (2 * ww - 1) + (o.class_token ? 3 : 0);
  tokens_ = patches + (o.class_token ? 1 : 0);
  if (split) ctx.divide_by_tp(o.num_heads, "the attention heads (num_attention_heads)");
  torch::nn::Module& owner = o.owner != nullptr ? *o.owner : *this;
  table_ = owner.register_parameter("relative_position_bias_table",
                                    ctx.load("relative_position_bias_table", {offsets, o.num_heads},
                                             split ? TensorShard{.dim = 1} : TensorShard{}));
  ctx.skip("relative_position_index", "a buffer of the indices, computed here");
  // HF's index: patch (i, j) to patch (k, l) reads row ((i - k) + Wh - 1)(2 Ww - 1) +
  // (j - l) + Ww - 1; BEiT's class token reads the last three rows.
  const int64_t first = o.class_token ? 1 : 0;
  index_ = at::empty({tokens_, tokens_}, at::kLong);
  int64_t* index = index_.data_ptr<int64_t>();
  for (int64_t a = 0; a < tokens_; ++a) {
    for (int64_t b = 0; b < tokens_; ++b) {
      int64_t row = 0;
      if (a < first && b < first) {
        row = offsets - 1;
      } else if (b < first) {
        row = offsets - 2;
      } else if (a < first) {
        row = offsets - 3;
      } else {
        const int64_t i = (a - first) / ww, j = (a - first) % ww;
        const int64_t k = (b - first) / ww, l = (b - first) % ww;
        row = (i - k + wh - 1) * (2 * ww - 1) + (j - l + ww - 1);
      }
      index[a * tokens_ + b] = row;
    }
  }
  index_ = index_.view(-1).to(ctx.device());  // once here, not a host-to-device copy per forward
}

at::Tensor RelativePositionTable::bias() const {
  const at::Tensor rows = table_.index_select(0, index_);  // [tokens^2, heads]
  return rows.view({tokens_, tokens_, -1}).permute({2, 0, 1}).unsqueeze(0);
}

}  // namespace shardformer::layers

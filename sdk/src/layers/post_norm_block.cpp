// The post-norm encoder block: its modules under the family's names, and its pass, where each
// residual sum is normed in the pass of the row-parallel projection that ends its sublayer.
#include "shardformer/layers/post_norm_block.h"

#include "shardformer/error.h"
#include "shardformer/layers/module_path.h"
#include "shardformer/strings.h"

namespace shardformer::layers {

PostNormEncoderBlock::PostNormEncoderBlock(const BuildContext& ctx, const PostNormBlockOptions& o,
                                           int64_t layer_idx) {
  const PostNormNames& n = o.names;
  const int64_t head_dim = o.hidden_size / o.num_heads;
  if (head_dim * o.num_heads != o.hidden_size) {
    throw ModelError(str(ctx.path(), ": hidden_size (", o.hidden_size,
                         ") must divide by num_attention_heads (", o.num_heads, ")"));
  }
  const auto norm = [&](const std::string& path) {
    return register_at(
        *this, path,
        std::make_shared<LayerNorm>(context_at(ctx, path), o.hidden_size, o.layer_norm_eps));
  };
  const auto dropout = [&](const std::string& path) {
    return register_at(*this, path,
                       std::make_shared<Dropout>(context_at(ctx, path), o.hidden_dropout));
  };
  attention_ = register_at(
      *this, n.attention,
      std::make_shared<SelfAttention>(context_at(ctx, n.attention),
                                      SelfAttentionOptions{.hidden_size = o.hidden_size,
                                                           .num_heads = o.num_heads,
                                                           .num_kv_heads = o.num_heads,
                                                           .head_dim = head_dim,
                                                           .qkv_bias = true,
                                                           .out_bias = true,
                                                           .dropout = o.attention_dropout,
                                                           .out_name = n.out,
                                                           .q_name = n.query,
                                                           .k_name = n.key,
                                                           .v_name = n.value},
                                      layer_idx));
  attention_norm_ = norm(n.attention_norm);
  attention_dropout_ = dropout(n.attention_dropout);
  if (o.memory_size > 0) {
    cross_ = register_at(
        *this, n.cross,
        std::make_shared<CrossAttention>(context_at(ctx, n.cross),
                                         CrossAttentionOptions{.hidden_size = o.hidden_size,
                                                               .memory_size = o.memory_size,
                                                               .num_heads = o.num_heads,
                                                               .head_dim = head_dim,
                                                               .q_bias = true,
                                                               .k_bias = true,
                                                               .v_bias = true,
                                                               .out_bias = true,
                                                               .dropout = o.attention_dropout,
                                                               .q_name = n.query,
                                                               .k_name = n.key,
                                                               .v_name = n.value,
                                                               .out_name = n.out},
                                         layer_idx));
    cross_norm_ = norm(n.cross_norm);
    cross_dropout_ = dropout(n.cross_dropout);
  }
  mlp_ = std::make_shared<MLP>(ctx, MLPOptions{.hidden_size = o.hidden_size,
                                               .intermediate_size = o.intermediate_size,
                                               .activation = o.activation,
                                               .in_name = n.intermediate,
                                               .out_name = n.output,
                                               .owner = this});
  output_norm_ = norm(n.output_norm);
  output_dropout_ = dropout(n.output_dropout);
}

at::Tensor PostNormEncoderBlock::forward(const at::Tensor& x, const EncoderDecoderStep& step) {
  at::Tensor h =
      attention_->forward_residual(x, step.self, x, attention_norm_.get(),
                                   attention_dropout_.get())
          .normed;  // [batch, seq, hidden]
  if (cross_) {
    if (!step.memory.defined()) {
      throw Error("a post-norm block with cross-attention was run without its memory");
    }
    h = cross_
            ->forward_residual(h, step.memory, step.memory_mask, step.cross_cache, h,
                               cross_norm_.get(), cross_dropout_.get())
            .normed;
  }
  return mlp_->forward_residual(h, h, output_norm_.get(), output_dropout_.get()).normed;
}

}  // namespace shardformer::layers

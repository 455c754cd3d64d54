// Swin's config.json (HF SwinConfig): the stages' depths and heads, the window, the image and
// patch shapes, the switches.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

#include <array>
#include <cstdint>
#include <vector>

namespace shardformer::swin {

struct SwinConfig {
  int64_t embed_dim, num_channels, window_size, num_labels;
  std::vector<int64_t> depths, num_heads;         // per stage
  std::array<int64_t, 2> image_size, patch_size;  // [height, width]
  double mlp_ratio, layer_norm_eps, hidden_dropout, attention_dropout, drop_path_rate;
  bool qkv_bias, absolute_positions;
  layers::Activation hidden_act;

  // Throws CheckpointError / ModelError naming the file and key for a value this plugin does
  // not support (depths and num_heads of different lengths, a stage's width that its heads do
  // not divide, hidden_size other than the last stage's width).
  static SwinConfig from(const HFConfig& config);

  int64_t num_stages() const { return static_cast<int64_t>(depths.size()); }
  int64_t num_blocks() const;                // every stage's blocks
  int64_t first_block(int64_t stage) const;  // the stage's first block in that count
  int64_t dim(int64_t stage) const { return embed_dim << stage; }  // embed_dim 2^stage
  int64_t num_features() const { return dim(num_stages() - 1); }   // the last stage's width
  int64_t intermediate_size(int64_t stage) const;  // int(mlp_ratio * dim), as HF rounds
  // The patch grid of an image of image_size: ceil(height / ph) x ceil(width / pw).
  std::array<int64_t, 2> patch_grid(int64_t height, int64_t width) const;
};

}  // namespace shardformer::swin

// ViT's config.json (HF ViTConfig): the sizes, the image and patch shapes, the switches.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

#include <array>
#include <cstdint>

namespace shardformer::vit {

struct ViTConfig {
  int64_t hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  int64_t num_channels, num_labels, pooler_output_size;
  std::array<int64_t, 2> image_size, patch_size;  // [height, width]
  double layer_norm_eps, hidden_dropout, attention_dropout;
  bool qkv_bias;
  layers::Activation hidden_act, pooler_act;

  // Throws CheckpointError / ModelError naming the file and key for a value this plugin does
  // not support (an image smaller than a patch, a problem_type other than single-label
  // classification).
  static ViTConfig from(const HFConfig& config);
  // The patches of an image of image_size: (height / ph) x (width / pw), rounded down as the
  // convolution rounds.
  int64_t num_patches() const {
    return (image_size[0] / patch_size[0]) * (image_size[1] / patch_size[1]);
  }
};

}  // namespace shardformer::vit

// ViT's and BEiT's config.json (HF ViTConfig, BeitConfig): the sizes, the image and patch shapes,
// the switches. BEiT is ViT with relative position biases (per layer or shared), layer scale, an
// unbiased key projection and mean pooling.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

#include <array>
#include <cstdint>

namespace shardformer::vit {

struct ViTConfig {
  bool beit;  // model_type beit: BEiT's names and options below
  int64_t hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  int64_t num_channels, num_labels, pooler_output_size;
  std::array<int64_t, 2> image_size, patch_size;  // [height, width]
  double layer_norm_eps, hidden_dropout, attention_dropout;
  bool qkv_bias, key_bias;  // BEiT: query and value biased, key not
  layers::Activation hidden_act, pooler_act;
  // BEiT's options (ViT: absolute positions, none of the others).
  bool absolute_positions = true;
  bool relative_position_bias = false;         // a bias table per layer
  bool shared_relative_position_bias = false;  // one table for every layer
  double layer_scale = 0;                      // > 0: lambda_1 / lambda_2 per layer
  bool mean_pooling = false;  // pooled = pooler.layernorm(mean of the patch tokens)
  double drop_path_rate = 0;  // BEiT's stochastic depth in training, rising to this by layer

  // Throws CheckpointError / ModelError naming the file and key for a value this plugin does
  // not support (an image smaller than a patch, a problem_type other than single-label
  // classification).
  static ViTConfig from(const HFConfig& config);
  // The patches of an image of image_size: (height / ph) x (width / pw), rounded down as the
  // convolution rounds.
  int64_t num_patches() const {
    return (image_size[0] / patch_size[0]) * (image_size[1] / patch_size[1]);
  }
  std::string base_name() const { return beit ? "beit" : "vit"; }
};

}  // namespace shardformer::vit

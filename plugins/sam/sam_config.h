// SAM's config.json (HF SamConfig): the image encoder's, the prompt encoder's and the mask
// decoder's settings, each read from its own object and refused by name where not supported.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/layers/activation.h"

#include <cstdint>
#include <vector>

namespace shardformer::sam {

struct SamVisionConfig {  // vision_config
  int64_t hidden_size, num_hidden_layers, num_attention_heads, num_channels, image_size, patch_size,
      mlp_dim, window_size, output_channels, num_pos_feats;
  std::vector<int64_t> global_attn_indexes;  // layers attending over the whole grid
  double layer_norm_eps, attention_dropout;
  bool qkv_bias, use_abs_pos, use_rel_pos;
  layers::Activation hidden_act;

  int64_t grid() const { return image_size / patch_size; }  // patches per side
  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  // Layer `layer`'s window: window_size, or 0 for a global layer.
  int64_t window(int64_t layer) const;
};

struct SamPromptConfig {  // prompt_encoder_config
  int64_t hidden_size, image_size, image_embedding_size, mask_input_channels, num_point_embeddings;
  double layer_norm_eps;
  layers::Activation hidden_act;
};

struct SamDecoderConfig {  // mask_decoder_config
  int64_t hidden_size, num_hidden_layers, num_attention_heads, mlp_dim, attention_downsample_rate,
      num_multimask_outputs, iou_head_depth, iou_head_hidden_dim;
  double layer_norm_eps;
  layers::Activation hidden_act;

  int64_t num_mask_tokens() const { return num_multimask_outputs + 1; }
};

struct SamConfig {
  SamVisionConfig vision;
  SamPromptConfig prompt;
  SamDecoderConfig decoder;

  // Throws CheckpointError / ModelError naming the file and key ('vision_config.window_size')
  // for a missing object, an unknown key or a value this plugin does not support.
  static SamConfig from(const HFConfig& config);
};

}  // namespace shardformer::sam

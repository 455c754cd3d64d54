// SAM's config keys, read or refused by name.
#include "sam_config.h"

#include "shardformer/error.h"
#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::sam {

namespace {

SamVisionConfig vision_from(const HFConfig& c) {
  SamVisionConfig v{};
  v.hidden_size = c.get_int("hidden_size", 768);
  v.num_hidden_layers = c.get_int("num_hidden_layers", 12);
  v.num_attention_heads = c.get_int("num_attention_heads", 12);
  v.num_channels = c.get_int("num_channels", 3);
  v.image_size = c.get_int("image_size", 1024);
  v.patch_size = c.get_int("patch_size", 16);
  const double mlp_ratio = c.get_double("mlp_ratio", 4.0);
  v.mlp_dim =
      c.get_optional_int("mlp_dim").value_or(static_cast<int64_t>(v.hidden_size * mlp_ratio));
  v.window_size = c.get_int("window_size", 14);
  v.output_channels = c.get_int("output_channels", 256);
  v.num_pos_feats = c.get_int("num_pos_feats", 128);
  v.global_attn_indexes = c.get_int_list("global_attn_indexes").value_or(std::vector<int64_t>{});
  v.layer_norm_eps = c.get_double("layer_norm_eps", 1e-6);
  v.attention_dropout = c.get_probability("attention_dropout", 0.0);
  v.qkv_bias = c.get_bool("qkv_bias", true);
  v.use_abs_pos = c.get_bool("use_abs_pos", true);
  v.use_rel_pos = c.get_bool("use_rel_pos", true);
  v.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  // scale sizes the random init of the prompt encoder's Gaussian matrix, which is loaded.
  c.ignore({"scale"});
  c.refuse_unread("vision_config keys SAM's image encoder does not implement");
  c.require(v.hidden_size % v.num_attention_heads == 0,
            "vision_config.hidden_size must divide by num_attention_heads");
  c.require(v.patch_size > 0 && v.image_size % v.patch_size == 0,
            "vision_config.image_size must be a multiple of patch_size");
  c.require(v.window_size >= 0, "vision_config.window_size must not be negative");
  for (const int64_t layer : v.global_attn_indexes) {
    c.require(layer >= 0 && layer < v.num_hidden_layers,
              str("vision_config.global_attn_indexes holds ", layer, ", not a layer of ",
                  v.num_hidden_layers));
  }
  return v;
}

SamPromptConfig prompt_from(const HFConfig& c) {
  SamPromptConfig p{};
  p.hidden_size = c.get_int("hidden_size", 256);
  p.image_size = c.get_int("image_size", 1024);
  p.image_embedding_size = c.get_int("image_embedding_size", 64);
  p.mask_input_channels = c.get_int("mask_input_channels", 16);
  p.num_point_embeddings = c.get_int("num_point_embeddings", 4);
  p.layer_norm_eps = c.get_double("layer_norm_eps", 1e-6);
  p.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  // patch_size only derives image_embedding_size, which the file states.
  c.ignore({"patch_size"});
  c.refuse_unread("prompt_encoder_config keys SAM's prompt encoder does not implement");
  c.require(p.mask_input_channels >= 4 && p.mask_input_channels % 4 == 0,
            "prompt_encoder_config.mask_input_channels must be a positive multiple of 4");
  c.require(p.num_point_embeddings == 4,
            "prompt_encoder_config.num_point_embeddings must be 4 (two point labels, two box "
            "corners)");
  return p;
}

SamDecoderConfig decoder_from(const HFConfig& c) {
  SamDecoderConfig d{};
  d.hidden_size = c.get_int("hidden_size", 256);
  d.num_hidden_layers = c.get_int("num_hidden_layers", 2);
  d.num_attention_heads = c.get_int("num_attention_heads", 8);
  d.mlp_dim = c.get_int("mlp_dim", 2048);
  d.attention_downsample_rate = c.get_int("attention_downsample_rate", 2);
  d.num_multimask_outputs = c.get_int("num_multimask_outputs", 3);
  d.iou_head_depth = c.get_int("iou_head_depth", 3);
  d.iou_head_hidden_dim = c.get_int("iou_head_hidden_dim", 256);
  d.layer_norm_eps = c.get_double("layer_norm_eps", 1e-6);
  d.hidden_act = layers::config_activation(c, "hidden_act", "relu");
  c.refuse_unread("mask_decoder_config keys SAM's mask decoder does not implement");
  for (const int64_t rate : {int64_t{1}, int64_t{2}, d.attention_downsample_rate}) {
    c.require(rate > 0 && d.hidden_size % (rate * d.num_attention_heads) == 0,
              str("mask_decoder_config.hidden_size must divide by num_attention_heads x ", rate,
                  " (the attentions' downsample rates: 1, 2 and attention_downsample_rate)"));
  }
  c.require(d.hidden_size % 8 == 0, "mask_decoder_config.hidden_size must divide by 8");
  c.require(d.iou_head_depth >= 2, "mask_decoder_config.iou_head_depth must be at least 2");
  return d;
}

}  // namespace

int64_t SamVisionConfig::window(int64_t layer) const {
  const bool global = std::find(global_attn_indexes.begin(), global_attn_indexes.end(), layer) !=
                      global_attn_indexes.end();
  return global ? 0 : window_size;
}

SamConfig SamConfig::from(const HFConfig& c) {
  c.require(c.model_type() == "sam", "model_type '" + c.model_type() + "' is not sam");
  SamConfig s{vision_from(c.sub_config("vision_config")),
              prompt_from(c.sub_config("prompt_encoder_config")),
              decoder_from(c.sub_config("mask_decoder_config"))};
  const SamVisionConfig& v = s.vision;
  c.require(s.prompt.hidden_size == v.output_channels && s.decoder.hidden_size == v.output_channels,
            str("prompt_encoder_config.hidden_size (", s.prompt.hidden_size,
                ") and mask_decoder_config.hidden_size (", s.decoder.hidden_size,
                ") must equal vision_config.output_channels (", v.output_channels, ")"));
  c.require(2 * v.num_pos_feats == v.output_channels,
            "vision_config.num_pos_feats must be half of output_channels");
  c.require(
      s.prompt.image_embedding_size == v.grid() && s.prompt.image_size == v.image_size,
      str("prompt_encoder_config.image_size and image_embedding_size (", s.prompt.image_size, ", ",
          s.prompt.image_embedding_size, ") must match the image encoder's image_size and grid (",
          v.image_size, ", ", v.grid(), ")"));
  return s;
}

}  // namespace shardformer::sam

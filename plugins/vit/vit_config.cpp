// ViT's and BEiT's config keys, read or refused by name.
#include "vit_config.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

namespace shardformer::vit {

ViTConfig ViTConfig::from(const HFConfig& c) {
  ViTConfig v{};
  c.require(c.model_type() == "vit" || c.model_type() == "beit",
            "model_type '" + c.model_type() + "' is not vit or beit");
  v.beit = c.model_type() == "beit";
  v.hidden_size = c.get_int("hidden_size", 768);
  v.num_hidden_layers = c.get_int("num_hidden_layers", 12);
  v.num_attention_heads = c.get_int("num_attention_heads", 12);
  v.intermediate_size = c.get_int("intermediate_size", 3072);
  v.num_channels = c.get_int("num_channels", 3);
  v.image_size = c.get_int_pair("image_size", 224);
  v.patch_size = c.get_int_pair("patch_size", 16);
  v.layer_norm_eps = c.get_double("layer_norm_eps", 1e-12);
  v.hidden_dropout = c.get_probability("hidden_dropout_prob", 0.0);
  v.attention_dropout = c.get_probability("attention_probs_dropout_prob", 0.0);
  v.qkv_bias = v.beit || c.get_bool("qkv_bias", true);
  v.key_bias = !v.beit && v.qkv_bias;
  v.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  if (v.beit) {
    v.absolute_positions = c.get_bool("use_absolute_position_embeddings", false);
    v.relative_position_bias = c.get_bool("use_relative_position_bias", false);
    v.shared_relative_position_bias = c.get_bool("use_shared_relative_position_bias", false);
    v.layer_scale = c.get_double("layer_scale_init_value", 0.1);
    v.mean_pooling = c.get_bool("use_mean_pooling", true);
    v.drop_path_rate = c.get_probability("drop_path_rate", 0.1);
    v.pooler_act = layers::Activation::kTanh;  // unused: BEiT's pooler has no dense layer
    v.pooler_output_size = v.hidden_size;
    // The masked-image-modeling head's vocabulary and the segmentation heads' settings.
    c.ignore({"vocab_size", "use_mask_token", "pool_scales", "use_auxiliary_head",
              "auxiliary_loss_weight", "auxiliary_channels", "auxiliary_num_convs",
              "auxiliary_concat_input", "semantic_loss_ignore_index", "add_fpn",
              "reshape_hidden_states", "out_features", "out_indices", "stage_names"});
  } else {
    v.pooler_act = layers::config_activation(c, "pooler_act", "tanh");
    v.pooler_output_size = c.get_optional_int("pooler_output_size").value_or(v.hidden_size);
  }
  const std::optional<HFConfig> labels = c.get_object("id2label");
  v.num_labels = labels ? static_cast<int64_t>(labels->keys().size()) : 2;
  // encoder_stride sizes ViTForMaskedImageModeling's decoder only.
  c.ignore({"encoder_stride"});
  const std::string problem = c.get_string("problem_type", "single_label_classification");
  c.require(problem == "single_label_classification",
            str("problem_type '", problem, "' (only single_label_classification)"));
  c.require(v.hidden_size % v.num_attention_heads == 0,
            "hidden_size must divide by num_attention_heads");
  for (int i = 0; i < 2; ++i) {
    c.require(v.patch_size[i] > 0 && v.image_size[i] >= v.patch_size[i],
              str("image_size ", v.image_size[0], " x ", v.image_size[1],
                  " must hold at least one patch of patch_size ", v.patch_size[0], " x ",
                  v.patch_size[1]));
  }
  return v;
}

}  // namespace shardformer::vit

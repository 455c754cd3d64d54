// ViT's config keys, read or refused by name.
#include "vit_config.h"

#include "shardformer/strings.h"

namespace shardformer::vit {

ViTConfig ViTConfig::from(const HFConfig& c) {
  ViTConfig v{};
  c.require(c.model_type() == "vit", "model_type '" + c.model_type() + "' is not vit");
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
  v.qkv_bias = c.get_bool("qkv_bias", true);
  v.hidden_act = layers::parse_activation(c.get_string("hidden_act", "gelu"),
                                          c.path().string() + ": hidden_act");
  v.pooler_act = layers::parse_activation(c.get_string("pooler_act", "tanh"),
                                          c.path().string() + ": pooler_act");
  v.pooler_output_size = c.get_optional_int("pooler_output_size").value_or(v.hidden_size);
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

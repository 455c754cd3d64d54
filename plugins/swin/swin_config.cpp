// Swin's config keys, read or refused by name.
#include "swin_config.h"

#include "shardformer/layers/config_activation.h"
#include "shardformer/strings.h"

#include <numeric>

namespace shardformer::swin {

SwinConfig SwinConfig::from(const HFConfig& c) {
  SwinConfig s{};
  c.require(c.model_type() == "swin", "model_type '" + c.model_type() + "' is not swin");
  s.embed_dim = c.get_int("embed_dim", 96);
  s.num_channels = c.get_int("num_channels", 3);
  s.window_size = c.get_int("window_size", 7);
  s.depths = c.get_int_list("depths").value_or(std::vector<int64_t>{2, 2, 6, 2});
  s.num_heads = c.get_int_list("num_heads").value_or(std::vector<int64_t>{3, 6, 12, 24});
  s.image_size = c.get_int_pair("image_size", 224);
  s.patch_size = c.get_int_pair("patch_size", 4);
  s.mlp_ratio = c.get_double("mlp_ratio", 4.0);
  s.layer_norm_eps = c.get_double("layer_norm_eps", 1e-5);
  s.hidden_dropout = c.get_probability("hidden_dropout_prob", 0.0);
  s.attention_dropout = c.get_probability("attention_probs_dropout_prob", 0.0);
  s.drop_path_rate = c.get_probability("drop_path_rate", 0.1);
  s.qkv_bias = c.get_bool("qkv_bias", true);
  s.absolute_positions = c.get_bool("use_absolute_embeddings", false);
  s.hidden_act = layers::config_activation(c, "hidden_act", "gelu");
  const std::optional<HFConfig> labels = c.get_object("id2label");
  s.num_labels = labels ? static_cast<int64_t>(labels->keys().size()) : 2;
  const std::string problem = c.get_string("problem_type", "single_label_classification");
  c.require(problem == "single_label_classification",
            str("problem_type '", problem, "' (only single_label_classification)"));
  c.require(!s.depths.empty() && s.depths.size() == s.num_heads.size(),
            "depths and num_heads must name the same stages");
  for (int64_t stage = 0; stage < s.num_stages(); ++stage) {
    const size_t i = static_cast<size_t>(stage);
    c.require(s.depths[i] > 0 && s.num_heads[i] > 0 && s.dim(stage) % s.num_heads[i] == 0,
              str("stage ", stage, ": ", s.depths[i], " blocks of ", s.num_heads[i],
                  " heads over width ", s.dim(stage), " (embed_dim 2^stage)"));
  }
  c.require(s.window_size > 0 && s.patch_size[0] > 0 && s.patch_size[1] > 0,
            "window_size and patch_size must be positive");
  // SwinConfig writes hidden_size and num_layers from the lists (the last stage's width and the
  // stage count): they must agree.
  c.require(c.get_int("hidden_size", s.num_features()) == s.num_features(),
            str("hidden_size must be the last stage's width, embed_dim 2^(stages - 1) = ",
                s.num_features()));
  c.require(c.get_int("num_layers", s.num_stages()) == s.num_stages(),
            str("num_layers must be the number of stages in depths, ", s.num_stages()));
  // encoder_stride sizes SwinForMaskedImageModeling's decoder; out_features, out_indices and
  // stage_names choose SwinBackbone's outputs.
  c.ignore({"encoder_stride", "out_features", "out_indices", "stage_names"});
  return s;
}

int64_t SwinConfig::num_blocks() const {
  return std::accumulate(depths.begin(), depths.end(), int64_t{0});
}

int64_t SwinConfig::first_block(int64_t stage) const {
  return std::accumulate(depths.begin(), depths.begin() + stage, int64_t{0});
}

int64_t SwinConfig::intermediate_size(int64_t stage) const {
  return static_cast<int64_t>(mlp_ratio * static_cast<double>(dim(stage)));
}

std::array<int64_t, 2> SwinConfig::patch_grid(int64_t height, int64_t width) const {
  return {(height + patch_size[0] - 1) / patch_size[0],
          (width + patch_size[1] - 1) / patch_size[1]};
}

}  // namespace shardformer::swin

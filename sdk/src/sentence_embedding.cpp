// Sentence pooling as sentence-transformers' Pooling and Normalize modules compute it.
#include "shardformer/sentence_embedding.h"

#include "json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer {
namespace {

namespace fs = std::filesystem;

// 1_Pooling/config.json: exactly one supported mode set; every key known.
void read_pooling(const fs::path& file, SentencePooling& pooling) {
  const nlohmann::json json = detail::read_json_file(file);
  if (!json.is_object()) throw CheckpointError(str(file.string(), ": expected a JSON object"));
  int modes = 0;
  for (const auto& item : json.items()) {
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    const auto flag = [&] {
      if (!value.is_boolean()) {
        throw CheckpointError(str(file.string(), ": key '", key, "' must be a boolean"));
      }
      return value.get<bool>();
    };
    if (key == "word_embedding_dimension") {
      if (!value.is_number_integer()) {
        throw CheckpointError(str(file.string(), ": key '", key, "' must be an integer"));
      }
      pooling.dimension = value.get<int64_t>();
    } else if (key == "pooling_mode_mean_tokens" || key == "pooling_mode_cls_token" ||
               key == "pooling_mode_max_tokens" || key == "pooling_mode_mean_sqrt_len_tokens") {
      if (!flag()) continue;
      ++modes;
      pooling.mode = key == "pooling_mode_mean_tokens"  ? SentencePooling::Mode::kMean
                     : key == "pooling_mode_cls_token"  ? SentencePooling::Mode::kCls
                     : key == "pooling_mode_max_tokens" ? SentencePooling::Mode::kMax
                                                        : SentencePooling::Mode::kMeanSqrtLen;
    } else if (key == "pooling_mode_weightedmean_tokens" || key == "pooling_mode_lasttoken") {
      if (flag()) {
        throw CheckpointError(str(file.string(), ": ", key, " = true is not supported"));
      }
    } else if (key == "include_prompt") {
      if (!flag())
        throw CheckpointError(str(file.string(), ": include_prompt = false is not supported"));
    } else {
      throw CheckpointError(str(file.string(), ": unknown key '", key, "'"));
    }
  }
  if (modes != 1) {
    throw CheckpointError(
        str(file.string(), ": ", modes, " pooling modes are set; exactly one is supported"));
  }
}

void read_max_length(const fs::path& file, SentencePooling& pooling) {
  const nlohmann::json json = detail::read_json_file(file);
  const auto it = json.is_object() ? json.find("max_seq_length") : json.end();
  if (it != json.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1) {
      throw CheckpointError(str(file.string(), ": max_seq_length must be a positive integer"));
    }
    pooling.max_seq_length = it->get<int64_t>();
  }
}

}  // namespace

SentencePooling SentencePooling::from_folder(const fs::path& folder) {
  SentencePooling pooling;
  const fs::path modules_file = folder / "modules.json";
  if (!fs::exists(modules_file)) return pooling;
  const nlohmann::json modules = detail::read_json_file(modules_file);
  if (!modules.is_array()) {
    throw CheckpointError(str(modules_file.string(), ": expected an array of modules"));
  }
  bool pooled = false;
  for (const nlohmann::json& module : modules) {
    const std::string type = module.is_object() ? module.value("type", "") : "";
    const std::string path = module.is_object() ? module.value("path", "") : "";
    if (type == "sentence_transformers.models.Transformer") continue;  // the model itself
    if (type == "sentence_transformers.models.Pooling") {
      read_pooling(folder / path / "config.json", pooling);
      pooled = true;
    } else if (type == "sentence_transformers.models.Normalize") {
      pooling.normalize = true;
    } else {
      throw CheckpointError(str(modules_file.string(), ": module type '", type,
                                "' is not supported (Transformer, Pooling, Normalize)"));
    }
  }
  if (!pooled) {
    throw CheckpointError(str(modules_file.string(), ": no Pooling module"));
  }
  if (fs::exists(folder / "sentence_bert_config.json")) {
    read_max_length(folder / "sentence_bert_config.json", pooling);
  }
  return pooling;
}

at::Tensor SentencePooling::apply(const at::Tensor& hidden,
                                  const at::Tensor& attention_mask) const {
  const at::Tensor x = hidden.to(at::kFloat);                                          // [b, s, d]
  const at::Tensor mask = attention_mask.to(x.device()).to(at::kFloat).unsqueeze(-1);  // [b, s, 1]
  at::Tensor pooled;                                                                   // [b, d]
  switch (mode) {
    case Mode::kCls: pooled = x.select(1, 0); break;
    case Mode::kMax: pooled = std::get<0>(x.masked_fill(mask == 0, -1e9).max(1)); break;
    case Mode::kMean:
    case Mode::kMeanSqrtLen: {
      const at::Tensor sum = (x * mask).sum(1);
      const at::Tensor count = mask.sum(1).clamp_min(1e-9);
      pooled = mode == Mode::kMean ? sum / count : sum / count.sqrt();
      break;
    }
  }
  return normalize ? pooled / pooled.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12) : pooled;
}

}  // namespace shardformer

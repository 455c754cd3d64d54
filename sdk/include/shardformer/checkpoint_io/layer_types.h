// Per-layer attention kinds as config.json lists them by name: Mistral's, Qwen's and Gemma's
// layer_types ("full_attention" / "sliding_attention"), GPT-Neo's attention_layers ("global" /
// "local"). Read once here so that every family checks the list alike.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"

#include <optional>
#include <string>
#include <vector>

namespace shardformer {

// Which layers attend within a local window: entry i is true where key's list names layer i
// `local`, false where it names it `global`. nullopt when config.json has no `key`; ConfigError
// naming the key for a list of another length than num_layers or an entry of another name.
std::optional<std::vector<bool>> windowed_layers(const HFConfig& config, const std::string& key,
                                                 int64_t num_layers, const std::string& global,
                                                 const std::string& local);

}  // namespace shardformer

// Reading a layer's activation from a model's config.json: the key, its default, and the error
// that names the file and key, written once for every family.
#pragma once

#include "shardformer/layers/activation.h"

#include <string>

namespace shardformer {
class HFConfig;
}

namespace shardformer::layers {

// The activation config.json names under `key` (`fallback` where the key is absent); an
// unknown name is a ModelError naming the file, the key and the supported names.
Activation config_activation(const HFConfig& config, const std::string& key,
                             const std::string& fallback);

}  // namespace shardformer::layers

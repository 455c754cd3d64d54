// Fuzz target: config.json of a HuggingFace checkpoint (HFConfig::parse), then every typed getter
// on every key, nested objects included. CheckpointError is the expected outcome for a bad file
// or a key of the wrong type.
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"

#include <cstdint>
#include <string>

namespace {

using shardformer::HFConfig;

constexpr int kMaxObjectDepth = 4;

// Runs one getter: a CheckpointError (missing key, wrong type) is an expected answer.
template <typename Getter>
void get(Getter getter) {
  try {
    getter();
  } catch (const shardformer::CheckpointError&) {
  }
}

void exercise(const HFConfig& config, int depth) {
  get([&] { config.architectures(); });
  get([&] { config.model_type(); });
  get([&] { config.num_hidden_layers(); });
  for (const std::string& key : config.keys()) {
    config.holds_default(key);
    get([&] { config.get_int(key); });
    get([&] { config.get_int(key, 0); });
    get([&] { config.get_double(key); });
    get([&] { config.get_double(key, 0.0); });
    get([&] { config.get_bool(key, false); });
    get([&] { config.get_probability(key, 0.0); });
    get([&] { config.get_string(key); });
    get([&] { config.get_string(key, ""); });
    get([&] { config.get_string_list(key); });
    get([&] { config.get_optional_int(key); });
    get([&] {
      if (auto object = config.get_object(key); object && depth < kMaxObjectDepth) {
        exercise(*object, depth + 1);
      }
    });
  }
  get([&] { config.get_int("absent"); });
  get([&] { config.refuse_unread("fuzzing"); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const HFConfig config =
        HFConfig::parse(std::string(reinterpret_cast<const char*>(data), size), "config.json");
    exercise(config, 0);
  } catch (const shardformer::Error&) {
    // Invalid JSON or a malformed top level: refused with an error naming the file.
  }
  return 0;
}

// Paths the tests need (HF references, tiny models, plugins, the host binary, the venv's Python):
// taken from the environment when set, else the build tree's, compiled in by
// tests/CMakeLists.txt.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace shardformer::testing {

inline std::filesystem::path env_or(const char* name, const char* build_tree_default) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : build_tree_default;
}

inline std::filesystem::path test_data_dir() {
  return env_or("SHARDFORMER_TEST_DATA", SHARDFORMER_TEST_DATA_DEFAULT);
}
inline std::filesystem::path models_dir() {
  return env_or("SHARDFORMER_MODELS", SHARDFORMER_MODELS_DEFAULT);
}
inline std::filesystem::path plugin_dir() {
  return env_or("SHARDFORMER_PLUGIN_DIR", SHARDFORMER_PLUGIN_DIR_DEFAULT);
}
inline std::filesystem::path host_binary() {
  return env_or("SHARDFORMER_HOST", SHARDFORMER_HOST_DEFAULT);
}
// The project venv's Python (HF transformers, safetensors: the references) and tools/.
inline std::filesystem::path python() {
  return env_or("SHARDFORMER_PYTHON", SHARDFORMER_PYTHON_DEFAULT);
}
inline std::filesystem::path tools_dir() {
  return env_or("SHARDFORMER_TOOLS", SHARDFORMER_TOOLS_DEFAULT);
}

}  // namespace shardformer::testing

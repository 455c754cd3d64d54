// Paths the tests need (HF references, tiny models, plugins, the host binary, the venv's Python):
// taken from the environment when set, else the build tree's, which tests/CMakeLists.txt writes
// into one generated source (test_paths.cpp) so that no test source's flags name the clone.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace shardformer::testing {

// The build tree's paths (the generated test_paths.cpp).
namespace build_tree {
extern const char* const kTestData;
extern const char* const kModels;
extern const char* const kPluginDir;
extern const char* const kHost;
extern const char* const kPython;
extern const char* const kSourceDir;
extern const char* const kBinaryDir;
}  // namespace build_tree

inline std::filesystem::path env_or(const char* name, const char* build_tree_default) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : build_tree_default;
}

inline std::filesystem::path test_data_dir() {
  return env_or("SHARDFORMER_TEST_DATA", build_tree::kTestData);
}
inline std::filesystem::path models_dir() {
  return env_or("SHARDFORMER_MODELS", build_tree::kModels);
}
inline std::filesystem::path plugin_dir() {
  return env_or("SHARDFORMER_PLUGIN_DIR", build_tree::kPluginDir);
}
inline std::filesystem::path host_binary() { return env_or("SHARDFORMER_HOST", build_tree::kHost); }
// The project venv's Python (HF transformers, safetensors: the references) and tools/.
inline std::filesystem::path python() { return env_or("SHARDFORMER_PYTHON", build_tree::kPython); }
inline std::filesystem::path tools_dir() {
  return env_or("SHARDFORMER_TOOLS",
                (std::filesystem::path(build_tree::kSourceDir) / "tools").c_str());
}
// The project's source tree and the build tree the tests were built in.
inline std::filesystem::path source_dir() { return build_tree::kSourceDir; }
inline std::filesystem::path binary_dir() { return build_tree::kBinaryDir; }

}  // namespace shardformer::testing

// Plugin discovery: loads every shared library on the plugin search path, checks its
// descriptor against this host, and maps HF architecture names to the plugin serving them.
#pragma once

#include "shardformer/model.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace shardformer::host {

struct PluginInfo {
  std::filesystem::path file;
  std::string name, version, description, sdk_version, torch_version;
  uint32_t abi_major = 0, abi_minor = 0;
  int cxx11_abi = 0;
  std::vector<std::string> architectures;
};

// A library that was found but refused, and why (each way a plugin can be wrong has its own
// message, naming both sides' versions where versions are the reason).
struct PluginFailure {
  std::filesystem::path file;
  std::string reason;
};

class PluginRegistry {
 public:
  PluginRegistry();
  ~PluginRegistry();
  PluginRegistry(PluginRegistry&&) noexcept;
  PluginRegistry& operator=(PluginRegistry&&) noexcept;

  // Loads every "*.so" file (sorted by name) in each folder of search_path, in order. A
  // library that fails is recorded in failures() and does not stop the others; a missing
  // folder is skipped. When two plugins serve one architecture, the first found keeps it.
  static PluginRegistry discover(const std::vector<std::filesystem::path>& search_path);

  const std::vector<PluginInfo>& plugins() const;
  const std::vector<PluginFailure>& failures() const;
  const std::vector<std::filesystem::path>& search_path() const;

  // The plugin serving architecture; throws PluginError listing the known architectures.
  const PluginInfo& find(const std::string& architecture) const;
  // Builds the model through the serving plugin's factory. The model keeps its library loaded.
  std::shared_ptr<Model> create_model(const ModelArgs& args) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The host's plugin search path: the configured folders, then SHARDFORMER_PLUGIN_PATH
// (colon-separated), then <host dir>/plugins and <host dir>/../lib/shardformer/plugins.
std::vector<std::filesystem::path> plugin_search_path(
    const std::vector<std::filesystem::path>& configured);

}  // namespace shardformer::host

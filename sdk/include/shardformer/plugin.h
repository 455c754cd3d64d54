// What a plugin author writes against: the ModelFamily a plugin implements, and the macro
// that exports it through the C entry point with the version facts the host checks.
#pragma once

#include "shardformer/model.h"
#include "shardformer/plugin_abi.h"

#include <torch/version.h>

#include <memory>
#include <string>
#include <vector>

namespace shardformer {

// A model family (one per plugin): its identity and a factory for the architectures it serves.
class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual std::string description() const = 0;
  virtual std::vector<std::string> architectures() const = 0;
  // Builds the model of args.architecture, loading its weights from args.checkpoint.
  virtual std::shared_ptr<Model> create(const ModelArgs& args) const = 0;
};

namespace detail {

// Keeps a ModelFamily and the C strings its descriptor points to alive for the library's life.
struct PluginExport {
  explicit PluginExport(std::unique_ptr<ModelFamily> family);
  std::unique_ptr<ModelFamily> family;
  std::string name, version, description;
  std::vector<std::string> architectures;
  std::vector<const char*> architecture_ptrs;
  ShardformerPluginDescriptor descriptor{};
};

using ModelFactoryFn = ShardformerModel* (*)(const ShardformerModelArgs*, char*, size_t);

// Fills the plugin's descriptor; returns NULL (after logging why) if the family throws.
const ShardformerPluginDescriptor* describe(PluginExport& (*get_plugin)(), ModelFactoryFn factory,
                                            const char* torch_version, int cxx11_abi) noexcept;
// Runs family.create(args), turning any exception into a message in error.
ShardformerModel* create_model(const ModelFamily& family, const ShardformerModelArgs* args,
                               char* error, size_t error_size) noexcept;
void destroy_model(ShardformerModel* model) noexcept;

}  // namespace detail

// Owns the model behind a ShardformerModel handle.
struct ModelHandle {
  std::shared_ptr<Model> model;
};

}  // namespace shardformer

// Exports FAMILY (a ModelFamily subclass with a default constructor) from a plugin library.
// Use once per library, at namespace scope in one .cpp file. Everything it defines but the
// entry point is local to the library.
#define SHARDFORMER_PLUGIN(FAMILY)                                                                 \
  namespace {                                                                                      \
  ::shardformer::detail::PluginExport& shardformer_plugin_export() {                               \
    static ::shardformer::detail::PluginExport plugin(std::make_unique<FAMILY>());                 \
    return plugin;                                                                                 \
  }                                                                                                \
  ShardformerModel* shardformer_plugin_create(const ShardformerModelArgs* args, char* error,       \
                                              size_t error_size) noexcept {                        \
    return ::shardformer::detail::create_model(*shardformer_plugin_export().family, args, error,   \
                                               error_size);                                        \
  }                                                                                                \
  }                                                                                                \
  extern "C" __attribute__((visibility("default"))) const ShardformerPluginDescriptor*             \
  shardformer_plugin_descriptor(void) noexcept {                                                   \
    return ::shardformer::detail::describe(&shardformer_plugin_export, &shardformer_plugin_create, \
                                           TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI);                 \
  }

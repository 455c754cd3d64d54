// The SDK side of the plugin entry point: filling descriptors and running factories so that
// no exception leaves a plugin through its C interface.
#include "shardformer/plugin.h"

#include "shardformer/log.h"

#include <cstring>
#include <string_view>

namespace shardformer::detail {
namespace {

void write_error(char* error, size_t error_size, std::string_view message) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace

PluginExport::PluginExport(std::unique_ptr<ModelFamily> made)
    : family(std::move(made)),
      name(family->name()),
      version(family->version()),
      description(family->description()),
      architectures(family->architectures()) {
  for (const auto& architecture : architectures) architecture_ptrs.push_back(architecture.c_str());
}

const ShardformerPluginDescriptor* describe(PluginExport& (*get_plugin)(), ModelFactoryFn factory,
                                            const char* torch_version, int cxx11_abi) noexcept {
  try {
    PluginExport& plugin = get_plugin();
    ShardformerPluginDescriptor& d = plugin.descriptor;
    d.abi_major = SHARDFORMER_ABI_MAJOR;
    d.abi_minor = SHARDFORMER_ABI_MINOR;
    d.sdk_version = SHARDFORMER_VERSION_STRING;
    d.torch_version = torch_version;
    d.cxx11_abi = cxx11_abi;
    d.name = plugin.name.c_str();
    d.version = plugin.version.c_str();
    d.description = plugin.description.c_str();
    d.architectures = plugin.architecture_ptrs.data();
    d.num_architectures = static_cast<uint32_t>(plugin.architecture_ptrs.size());
    d.create_model = factory;
    d.destroy_model = &destroy_model;
    return &d;
  } catch (const std::exception& e) {
    log::error(std::string("plugin failed to describe itself: ") + e.what());
  } catch (...) {
    log::error("plugin failed to describe itself (unknown exception)");
  }
  return nullptr;
}

ShardformerModel* create_model(const ModelFamily& family, const ShardformerModelArgs* args,
                               char* error, size_t error_size) noexcept {
  try {
    const auto& model_args = *reinterpret_cast<const ModelArgs*>(args);
    auto handle = std::make_unique<ModelHandle>(ModelHandle{family.create(model_args)});
    if (!handle->model) {
      write_error(error, error_size, family.name() + ": factory returned no model");
      return nullptr;
    }
    return reinterpret_cast<ShardformerModel*>(handle.release());
  } catch (const std::exception& e) {
    write_error(error, error_size, e.what());
  } catch (...) {
    write_error(error, error_size, family.name() + ": unknown exception while building the model");
  }
  return nullptr;
}

void destroy_model(ShardformerModel* model) noexcept {
  delete reinterpret_cast<ModelHandle*>(model);
}

}  // namespace shardformer::detail

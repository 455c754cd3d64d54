// A plugin library whose descriptor is set by compile definitions, to build the good and the
// deliberately wrong plugins the loader tests need. It builds no model.
#include "shardformer/plugin_abi.h"

#include <torch/version.h>

#include <cstring>

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifndef FAKE_ARCH
#define FAKE_ARCH "FakeModel"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR SHARDFORMER_ABI_MAJOR
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR SHARDFORMER_ABI_MINOR
#endif
#ifndef FAKE_TORCH_VERSION
#define FAKE_TORCH_VERSION TORCH_VERSION
#endif
#ifndef FAKE_CXX11_ABI
#define FAKE_CXX11_ABI _GLIBCXX_USE_CXX11_ABI
#endif

#ifdef FAKE_MISSING_SYMBOL
// A function of an SDK the host does not have, as a plugin built against another SDK calls.
namespace shardformer::layers {
int function_this_sdk_lacks(int);
}
#endif

namespace {

const char* const kArchitectures[] = {FAKE_ARCH};

ShardformerModel* create_model(const ShardformerModelArgs*, char* error, size_t error_size) {
#ifdef FAKE_MISSING_SYMBOL
  if (shardformer::layers::function_this_sdk_lacks(1) != 0) return nullptr;
#endif
  std::strncpy(error, FAKE_NAME " builds no models", error_size - 1);
  error[error_size - 1] = '\0';
  return nullptr;
}

void destroy_model(ShardformerModel*) {}

const ShardformerPluginDescriptor kDescriptor = {
    FAKE_ABI_MAJOR, FAKE_ABI_MINOR, SHARDFORMER_VERSION_STRING, FAKE_TORCH_VERSION, FAKE_CXX11_ABI,
    FAKE_NAME,      "9.9.9",        "loader test plugin",       kArchitectures,     1,
    &create_model,  &destroy_model,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ShardformerPluginDescriptor*
shardformer_plugin_descriptor(void) {
#ifdef FAKE_NULL_DESCRIPTOR
  return nullptr;
#else
  return &kDescriptor;
#endif
}

// The plugin ABI: the one C-linkage entry point every plugin library exports and the plain
// descriptor it returns. Nothing but C types cross it, and no exception does.
#pragma once

#include "shardformer/version.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Opaque handles: ShardformerModelArgs is a shardformer::ModelArgs, ShardformerModel owns a
// shardformer::Model. Both sides are C++ built against the same SDK, LibTorch and C++ ABI,
// which the host checks from the descriptor before it calls anything else.
typedef struct ShardformerModelArgs ShardformerModelArgs;
typedef struct ShardformerModel ShardformerModel;

typedef struct ShardformerPluginDescriptor {
  uint32_t abi_major;         // SHARDFORMER_ABI_MAJOR the plugin was built with
  uint32_t abi_minor;         // SHARDFORMER_ABI_MINOR the plugin was built with
  const char* sdk_version;    // SHARDFORMER_VERSION_STRING
  const char* torch_version;  // TORCH_VERSION of the LibTorch headers used
  int32_t cxx11_abi;          // _GLIBCXX_USE_CXX11_ABI
  const char* name;           // family name, e.g. "gpt2"
  const char* version;        // the plugin's own version
  const char* description;
  const char* const* architectures;  // HF "architectures" names served
  uint32_t num_architectures;
  // Builds the model for args. On failure returns NULL and writes a message (truncated to
  // error_size, NUL-terminated) into error. Never throws.
  ShardformerModel* (*create_model)(const ShardformerModelArgs* args, char* error,
                                    size_t error_size);
  // Destroys a model returned by create_model. Never throws.
  void (*destroy_model)(ShardformerModel* model);
} ShardformerPluginDescriptor;

typedef const ShardformerPluginDescriptor* (*ShardformerPluginEntry)(void);

// The exported symbol the host looks up in every library of its plugin path.
#define SHARDFORMER_PLUGIN_ENTRY_NAME "shardformer_plugin_descriptor"

#ifdef __cplusplus
}
#endif

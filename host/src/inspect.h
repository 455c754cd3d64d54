// `shardformer-host inspect`: describes a checkpoint folder and the plugin that serves it.
#pragma once

#include "plugin_registry.h"

#include <filesystem>
#include <iosfwd>

namespace shardformer::host {

void inspect_checkpoint(const std::filesystem::path& directory, const PluginRegistry& registry,
                        std::ostream& out);

}  // namespace shardformer::host

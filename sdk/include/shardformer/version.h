// Versions of the SDK and of its plugin ABI. A plugin records the ABI it was built against;
// the host refuses a plugin whose ABI major differs or whose minor is newer than its own.
#pragma once

#define SHARDFORMER_VERSION_STRING "0.4.0"
#define SHARDFORMER_ABI_MAJOR 6
#define SHARDFORMER_ABI_MINOR 0

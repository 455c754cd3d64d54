// A caching CPU allocator for large blocks: freed activation buffers are kept mapped and handed
// to the next request of about the same size, so repeated forward passes and decoding steps do
// not pay page faults and page zeroing on every layer; what it keeps is bounded by the peak in use.
#pragma once

#include <cstddef>
#include <cstdint>

namespace shardformer::runtime {

struct BlockCacheStats {
  int64_t hits = 0;          // requests served by a kept block
  int64_t misses = 0;        // requests that mapped a new block
  int64_t evictions = 0;     // kept blocks unmapped to make room for a miss
  int64_t cached_bytes = 0;  // bytes of freed blocks kept now
  int64_t mapped_bytes = 0;  // bytes of all blocks mapped now (in use + kept)
};

// Installs the cache as LibTorch's CPU allocator for the rest of the process (idempotent).
// Requests of at least min_block bytes are served whole pages from the cache or a fresh
// mapping; smaller ones go to the allocator installed before. A miss first unmaps the least
// recently freed blocks while the mapped total with its own block would pass twice the peak
// bytes in use (blocks handed out at once): a large block used alone (a forward's logits) and
// the smaller ones it alternates with (the layers' activations) both stay, and the mapped
// total never exceeds twice what the same requests would have mapped without the cache.
void install_cpu_block_cache(size_t min_block = size_t{1} << 20);

// Unmaps every kept block (e.g. before a phase with other shapes); blocks in use stay, and the
// peak starts again from them.
void release_cpu_block_cache();

BlockCacheStats cpu_block_cache_stats();

}  // namespace shardformer::runtime

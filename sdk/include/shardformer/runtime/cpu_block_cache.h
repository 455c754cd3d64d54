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
  int64_t refaults = 0;      // misses that a block evicted before would have served
  double limit = 2.0;        // the mapped total's limit now, in peaks of bytes in use
};

// Installs the cache as LibTorch's CPU allocator for the rest of the process (idempotent).
// Requests of at least min_block bytes are served whole pages from the cache or a fresh
// mapping; smaller ones go to the allocator installed before. A miss first unmaps the least
// recently freed blocks while the mapped total with its own block would pass the limit: twice
// the peak bytes in use (blocks handed out at once) at first, so that a large block used alone
// (a forward's logits) and the smaller ones it alternates with (the layers' activations) both
// stay. When a miss asks again for a size it evicted, the requests cycle through more sizes than
// that keeps, and the limit grows by half the peak, up to four times the peak: the mapped total
// never exceeds four times what the same requests would have mapped without the cache.
void install_cpu_block_cache(size_t min_block = size_t{1} << 20);

// Unmaps every kept block (e.g. before a phase with other shapes); blocks in use stay, the
// peak starts again from them and the limit at twice the peak.
void release_cpu_block_cache();

BlockCacheStats cpu_block_cache_stats();

}  // namespace shardformer::runtime

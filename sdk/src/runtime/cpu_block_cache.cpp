// The large-block CPU cache (cpu_block_cache.h): whole-page mappings kept when freed and reused
// for requests they fit within 1/8, evicted least-recently-freed first when a miss would take
// the mapped total past its limit (twice the peak bytes in use, raised when evictions thrash).
#include "shardformer/runtime/cpu_block_cache.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace shardformer::runtime {
namespace {

struct Block {
  void* data = nullptr;
  size_t size = 0;     // whole pages
  uint64_t freed = 0;  // when it was last freed (a counter), for eviction order
};

class CpuBlockCache final : public c10::Allocator {
 public:
  CpuBlockCache(c10::Allocator* small, size_t min_block)
      : small_(small), min_block_(min_block), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {}

  // The context is the data pointer (c10's raw_allocate / raw_deallocate need that): blocks in
  // use are found again by address.
  c10::DataPtr allocate(size_t n) override {
    if (n < min_block_) return small_->allocate(n);
    const size_t size = (n + page_ - 1) / page_ * page_;
    Block* block = take(size);
    return {block->data, block->data, &CpuBlockCache::give_back, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CpuBlockCache::give_back; }

  void copy_data(void* dest, const void* src, size_t count) const override {
    default_copy_data(dest, src, count);
  }

  BlockCacheStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    BlockCacheStats stats = stats_;
    stats.limit = static_cast<double>(limit_halves_) / 2.0;
    return stats;
  }

  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Block* block : kept_) unmap(block);
    kept_.clear();
    peak_in_use_ = in_use_bytes_;  // a new phase: its own peak and limit
    limit_halves_ = kFirstLimitHalves;
    evicted_.clear();
  }

  static CpuBlockCache* instance;

 private:
  // Whether a block of `block_size` bytes serves a request of `size`: it fits within 1/8.
  static bool serves(size_t block_size, size_t size) {
    return block_size >= size && block_size <= size + size / 8;
  }

  // The smallest kept block that serves `size`, else a new mapping after eviction.
  Block* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto best = kept_.end();
    for (auto it = kept_.begin(); it != kept_.end(); ++it) {
      if (serves((*it)->size, size) && (best == kept_.end() || (*it)->size < (*best)->size)) {
        best = it;
      }
    }
    if (best != kept_.end()) {
      Block* block = *best;
      kept_.erase(best);
      stats_.cached_bytes -= static_cast<int64_t>(block->size);
      ++stats_.hits;
      in_use_.emplace(block->data, block);
      note_in_use(block->size);
      return block;
    }
    ++stats_.misses;
    note_in_use(size);
    raise_limit_if_thrashing(size);
    // Kept blocks go, least recently freed first, while the mapped total with the new block
    // would pass the limit. One times the peak (what the requests alone map) thrashed: a
    // forward's 393 MiB logits and the layers' activations are never in use together, so each
    // evicted the other and every call faulted in 1.6 GB of fresh pages.
    std::sort(kept_.begin(), kept_.end(),
              [](const Block* a, const Block* b) { return a->freed < b->freed; });
    size_t evicted = 0;
    while (evicted < kept_.size() &&
           static_cast<size_t>(stats_.mapped_bytes) + size > peak_in_use_ * limit_halves_ / 2) {
      remember_eviction(kept_[evicted]->size);
      unmap(kept_[evicted++]);
      ++stats_.evictions;
    }
    kept_.erase(kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(evicted));
    void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TORCH_CHECK(data != MAP_FAILED, "CPU block cache: mapping ", size,
                " bytes failed: ", std::strerror(errno));
    stats_.mapped_bytes += static_cast<int64_t>(size);
    auto* block = new Block{data, size, 0};
    in_use_.emplace(data, block);
    return block;
  }

  // A block of ours goes back to the cache; anything else came from the small allocator.
  static void give_back(void* data) {
    CpuBlockCache& cache = *instance;
    std::unique_lock<std::mutex> lock(cache.mutex_);
    const auto it = cache.in_use_.find(data);
    if (it == cache.in_use_.end()) {
      lock.unlock();
      cache.small_->raw_deleter()(data);
      return;
    }
    Block* block = it->second;
    cache.in_use_.erase(it);
    cache.in_use_bytes_ -= block->size;
    block->freed = ++cache.clock_;
    cache.kept_.push_back(block);
    cache.stats_.cached_bytes += static_cast<int64_t>(block->size);
  }

  // Called with the mutex held. A miss that a block evicted since the last raise would have
  // served means the requests cycle through more sizes than the limit keeps (GPT-2 small's
  // sequence-parallel forward at 4 x 512: about 90 MiB of blocks of ten sizes against a peak of
  // 39 MiB in use, ten misses a call at twice the peak): the limit grows by half the peak, up to
  // kMaxLimitHalves.
  void raise_limit_if_thrashing(size_t size) {
    const bool refault = std::any_of(evicted_.begin(), evicted_.end(),
                                     [size](size_t evicted) { return serves(evicted, size); });
    if (!refault) return;
    ++stats_.refaults;
    if (limit_halves_ < kMaxLimitHalves) {
      ++limit_halves_;
      evicted_.clear();
    }
  }

  // Called with the mutex held: the sizes evicted lately (the last kRemembered).
  void remember_eviction(size_t size) {
    if (evicted_.size() == kRemembered) evicted_.erase(evicted_.begin());
    evicted_.push_back(size);
  }

  // Called with the mutex held.
  void note_in_use(size_t size) {
    in_use_bytes_ += size;
    peak_in_use_ = std::max(peak_in_use_, in_use_bytes_);
  }

  // Called with the mutex held.
  void unmap(Block* block) {
    munmap(block->data, block->size);
    stats_.mapped_bytes -= static_cast<int64_t>(block->size);
    stats_.cached_bytes -= static_cast<int64_t>(block->size);
    delete block;
  }

  c10::Allocator* small_;
  const size_t min_block_;
  const size_t page_;
  std::mutex mutex_;
  std::vector<Block*> kept_;
  std::unordered_map<void*, Block*> in_use_;
  uint64_t clock_ = 0;
  size_t in_use_bytes_ = 0;  // blocks handed out and not yet given back
  size_t peak_in_use_ = 0;   // the most in_use_bytes_ has been since install or release()
  static constexpr size_t kFirstLimitHalves = 4, kMaxLimitHalves = 8, kRemembered = 64;
  size_t limit_halves_ = kFirstLimitHalves;  // the mapped total's limit, in half peaks
  std::vector<size_t> evicted_;              // sizes evicted since the limit last grew
  BlockCacheStats stats_;
};

CpuBlockCache* CpuBlockCache::instance = nullptr;

}  // namespace

void install_cpu_block_cache(size_t min_block) {
  static std::once_flag once;
  std::call_once(once, [min_block] {
    // Never destroyed: tensors freed during static destruction still return their blocks here.
    CpuBlockCache::instance = new CpuBlockCache(c10::GetCPUAllocator(), min_block);
    c10::SetCPUAllocator(CpuBlockCache::instance, /*priority=*/1);
  });
}

void release_cpu_block_cache() {
  if (CpuBlockCache::instance != nullptr) CpuBlockCache::instance->release();
}

BlockCacheStats cpu_block_cache_stats() {
  return CpuBlockCache::instance != nullptr ? CpuBlockCache::instance->stats() : BlockCacheStats{};
}

}  // namespace shardformer::runtime

// The cache of packed weights: entries keyed by the weight's TensorImpl, each holding a weak
// reference to it, so that a freed weight's copy is dropped at the next lookup.
#include "packed_weights.h"

#include "shardformer/runtime/inference_scope.h"

#include <c10/util/intrusive_ptr.h>

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace shardformer::layers {
namespace {

struct PackedWeight {
  c10::weak_intrusive_ptr<c10::TensorImpl> weight;
  const void* data = nullptr;
  uint32_t version = 0;
  bool k_major = false;
  PackFormat format = PackFormat::kMkl;
  at::Tensor packed;  // undefined while the weight waits for its second product
};

std::mutex cache_mutex;
std::unordered_map<const c10::TensorImpl*, PackedWeight> cache;

int64_t budget_bytes() {
  static const int64_t budget =
      static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE) / 8;
  return budget;
}

bool absent_or_cpu_float(const at::Tensor& t) {
  return !t.defined() || (t.device().is_cpu() && t.scalar_type() == at::kFloat);
}

}  // namespace

int64_t packable_rows(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      bool k_major) {
  if (!runtime::InferenceScope::active() || weight.dim() != 2 || !weight.is_contiguous() ||
      weight.is_inference() || x.dim() < 2 || !absent_or_cpu_float(x) ||
      !absent_or_cpu_float(weight) || !absent_or_cpu_float(bias)) {
    return 0;
  }
  const int64_t k = weight.size(k_major ? 0 : 1);
  const int64_t m = x.numel() / std::max<int64_t>(k, 1);
  return x.size(-1) == k && m >= kPackedMinRows ? m : 0;
}

at::Tensor packed_weight(const at::Tensor& weight, bool k_major, int64_t rows, PackFormat format,
                         int64_t bytes, const std::function<at::Tensor()>& pack) {
  const std::lock_guard<std::mutex> lock(cache_mutex);
  const c10::TensorImpl* key = weight.unsafeGetTensorImpl();
  const uint32_t version = weight._version();
  auto it = cache.find(key);
  const bool current = it != cache.end() && !it->second.weight.expired() &&
                       it->second.data == weight.data_ptr() && it->second.version == version &&
                       it->second.k_major == k_major && it->second.format == format;
  if (current && it->second.packed.defined()) return it->second.packed;
  if (!current) {
    std::erase_if(cache, [key](const auto& entry) {
      return entry.first == key || entry.second.weight.expired();
    });
    cache.insert_or_assign(
        key,
        PackedWeight{.weight = c10::weak_intrusive_ptr<c10::TensorImpl>(weight.getIntrusivePtr()),
                     .data = weight.data_ptr(),
                     .version = version,
                     .k_major = k_major,
                     .format = format,
                     .packed = {}});
    if (rows < kPackAtFirstRows) return {};  // its first product: unpacked
    it = cache.find(key);
  }
  int64_t held = 0;
  for (const auto& entry : cache) {
    if (entry.second.packed.defined()) held += entry.second.packed.nbytes();
  }
  if (held + bytes > budget_bytes()) return {};
  it->second.packed = pack();
  return it->second.packed;
}

int64_t packed_weights() {
  const std::lock_guard<std::mutex> lock(cache_mutex);
  std::erase_if(cache, [](const auto& entry) { return entry.second.weight.expired(); });
  return std::count_if(cache.begin(), cache.end(),
                       [](const auto& entry) { return entry.second.packed.defined(); });
}

}  // namespace shardformer::layers

// Preallocated per-layer key/value buffers for incremental decoding.
#include "shardformer/kv_cache.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer {

KVCache::KVCache(int64_t num_layers, int64_t batch, int64_t num_heads, int64_t max_length,
                 int64_t head_dim, at::TensorOptions options)
    : lengths_(num_layers, 0), max_length_(max_length) {
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    keys_.push_back(at::empty({batch, num_heads, max_length, head_dim}, options));
    values_.push_back(at::empty({batch, num_heads, max_length, head_dim}, options));
  }
}

std::pair<at::Tensor, at::Tensor> KVCache::append(int64_t layer, const at::Tensor& keys,
                                                  const at::Tensor& values) {
  if (layer < 0 || layer >= num_layers()) {
    throw Error(str("KV cache: layer ", layer, " out of range [0, ", num_layers(), ")"));
  }
  int64_t& length = lengths_[layer];
  const int64_t added = keys.size(2);
  if (length + added > max_length_) {
    throw Error(str("KV cache: ", length, " cached + ", added, " new tokens exceed its capacity ",
                    max_length_));
  }
  keys_[layer].narrow(2, length, added).copy_(keys);
  values_[layer].narrow(2, length, added).copy_(values);
  length += added;
  return {keys_[layer].narrow(2, 0, length), values_[layer].narrow(2, 0, length)};
}

}  // namespace shardformer

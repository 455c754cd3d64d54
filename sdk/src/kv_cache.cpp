// Preallocated per-layer key/value buffers for incremental decoding.
#include "shardformer/kv_cache.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer {

KVCache::KVCache(int64_t num_layers, int64_t batch, int64_t num_heads, int64_t max_length,
                 int64_t head_dim, at::TensorOptions options)
    : keys_(num_layers),
      values_(num_layers),
      lengths_(num_layers, 0),
      batch_(batch),
      num_heads_(num_heads),
      max_length_(max_length),
      head_dim_(head_dim),
      options_(options) {}

namespace {

void check_layer(int64_t layer, int64_t num_layers) {
  if (layer < 0 || layer >= num_layers) {
    throw Error(str("KV cache: layer ", layer, " out of range [0, ", num_layers, ")"));
  }
}

}  // namespace

int64_t KVCache::length(int64_t layer) const {
  check_layer(layer, num_layers());
  return lengths_[layer];
}

std::pair<at::Tensor, at::Tensor> KVCache::get(int64_t layer) const {
  check_layer(layer, num_layers());
  const int64_t length = lengths_[layer];
  if (length == 0) throw Error(str("KV cache: layer ", layer, " holds no keys yet"));
  return {keys_[layer].narrow(2, 0, length), values_[layer].narrow(2, 0, length)};
}

std::pair<at::Tensor, at::Tensor> KVCache::append(int64_t layer, const at::Tensor& keys,
                                                  const at::Tensor& values) {
  check_layer(layer, num_layers());
  int64_t& length = lengths_[layer];
  const int64_t added = keys.size(2);
  if (max_length_ == 0) {  // sized by its one append
    if (length > 0) throw Error(str("KV cache: layer ", layer, " takes one append (filled)"));
    keys_[layer] = keys.clone(at::MemoryFormat::Contiguous);
    values_[layer] = values.clone(at::MemoryFormat::Contiguous);
    length = added;
    return {keys_[layer], values_[layer]};
  }
  if (length + added > max_length_) {
    throw Error(str("KV cache: ", length, " cached + ", added, " new tokens exceed its capacity ",
                    max_length_));
  }
  if (!keys_[layer].defined()) {
    keys_[layer] = at::empty({batch_, num_heads_, max_length_, head_dim_}, options_);
    values_[layer] = at::empty({batch_, num_heads_, max_length_, head_dim_}, options_);
  }
  keys_[layer].narrow(2, length, added).copy_(keys);
  values_[layer].narrow(2, length, added).copy_(values);
  length += added;
  return {keys_[layer].narrow(2, 0, length), values_[layer].narrow(2, 0, length)};
}

}  // namespace shardformer

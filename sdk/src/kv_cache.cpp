// Preallocated per-layer key/value buffers for incremental decoding.
#include "shardformer/kv_cache.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cstddef>
#include <cstring>

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

// dst[:, :, at : at + src.size(2)] = src, both [batch, heads, seq, head_dim]: on CPU, with one
// dtype and contiguous head_dim rows, row by row with memcpy (a decoding step's single token
// through copy_ cost more than the copy itself); otherwise by copy_.
void write_rows(const at::Tensor& dst, int64_t at, const at::Tensor& src) {
  const int64_t batch = src.size(0), heads = src.size(1), seq = src.size(2), dim = src.size(3);
  if (!dst.device().is_cpu() || !src.device().is_cpu() || dst.scalar_type() != src.scalar_type() ||
      src.stride(3) != 1 || !dst.is_contiguous() || batch != dst.size(0) || heads != dst.size(1) ||
      dim != dst.size(3)) {
    dst.narrow(2, at, seq).copy_(src);
    return;
  }
  const auto bytes = static_cast<size_t>(dim * src.element_size());
  const auto* from = static_cast<const std::byte*>(src.const_data_ptr());
  auto* to = static_cast<std::byte*>(dst.data_ptr());
  const int64_t item = src.element_size();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        std::memcpy(to + ((b * heads + h) * dst.size(2) + at + t) * dim * item,
                    from + (b * src.stride(0) + h * src.stride(1) + t * src.stride(2)) * item,
                    bytes);
      }
    }
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
  write_rows(keys_[layer], length, keys);
  write_rows(values_[layer], length, values);
  length += added;
  return {keys_[layer].narrow(2, 0, length), values_[layer].narrow(2, 0, length)};
}

}  // namespace shardformer

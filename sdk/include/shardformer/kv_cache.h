// Key/value cache for incremental decoding: one buffer per layer, allocated whole at the
// layer's first append and filled in place after, so a decoding step costs no reallocation and
// a pipeline stage holds buffers for its own layers only.
#pragma once

#include <ATen/Tensor.h>

#include <utility>
#include <vector>

namespace shardformer {

class KVCache {
 public:
  // Buffers of [batch, num_heads, max_length, head_dim] per layer, with options' dtype/device.
  // max_length 0: each layer takes one append, which sizes it (cross-attention's keys and
  // values, whose length the encoder's output gives).
  KVCache(int64_t num_layers, int64_t batch, int64_t num_heads, int64_t max_length,
          int64_t head_dim, at::TensorOptions options);

  // Appends keys/values [batch, heads, seq, head_dim] of `layer` and returns all cached ones
  // [batch, heads, length + seq, head_dim]. Throws Error when max_length would be exceeded.
  std::pair<at::Tensor, at::Tensor> append(int64_t layer, const at::Tensor& keys,
                                           const at::Tensor& values);

  // The keys / values cached for `layer` [batch, heads, length, head_dim] (cross-attention's,
  // appended once); throws Error when none are.
  std::pair<at::Tensor, at::Tensor> get(int64_t layer) const;

  // Tokens cached for `layer`: the past length a forward pass reads from its first layer
  // (a pipeline stage holds some layers only, and an interleaved step runs several chunks).
  int64_t length(int64_t layer) const;
  int64_t max_length() const { return max_length_; }
  int64_t num_layers() const { return static_cast<int64_t>(keys_.size()); }

 private:
  std::vector<at::Tensor> keys_, values_;
  std::vector<int64_t> lengths_;
  int64_t batch_, num_heads_, max_length_, head_dim_;
  at::TensorOptions options_;
};

}  // namespace shardformer

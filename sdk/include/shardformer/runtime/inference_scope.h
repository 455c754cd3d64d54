// A scope of pure inference (forward, loss without backward, generation): gradients off, and
// the SDK's layers may take the fused CPU kernels (kernels/). Outside such a scope, e.g. in
// the no-grad first pass of activation recomputation, layers use ATen's ops, so a recomputed
// block rounds exactly as its first pass did. It is also c10::InferenceMode: views and new
// tensors skip autograd's bookkeeping (version counters, view metadata), which was a fifth of
// a small model's decoding step; tensors made inside must not be kept for training.
#pragma once

#include <ATen/core/grad_mode.h>
#include <c10/core/InferenceMode.h>

namespace shardformer::runtime {

class InferenceScope {
 public:
  InferenceScope();
  ~InferenceScope();
  InferenceScope(const InferenceScope&) = delete;
  InferenceScope& operator=(const InferenceScope&) = delete;

  // Whether this thread is inside an InferenceScope.
  static bool active();

 private:
  at::AutoGradMode no_grad_{false};
  c10::InferenceMode inference_mode_;
  bool previous_;
};

}  // namespace shardformer::runtime

// A scope of pure inference (forward, loss without backward, generation): gradients off, and
// the SDK's layers may take the fused CPU kernels (kernels/). Outside such a scope, e.g. in
// the no-grad first pass of activation recomputation, layers use ATen's ops, so a recomputed
// block rounds exactly as its first pass did.
#pragma once

#include <ATen/core/grad_mode.h>

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
  bool previous_;
};

}  // namespace shardformer::runtime

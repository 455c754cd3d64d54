// oneDNN's linear and its weight reorder, called through the dispatcher (LibTorch registers them
// as mkldnn::_linear_pointwise and mkldnn::_reorder_linear_weight, the ops torch.compile's
// frozen CPU graphs use; no header ships), on weights packed once through the cache of packed
// weights (packed_weights.h).
#include "onednn_packed.h"

#include "packed_weights.h"

#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>

namespace shardformer::layers {
namespace {

// The op `name`, or nullopt where this LibTorch does not register it.
std::optional<c10::OperatorHandle> find_onednn_op(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""});
}

// weight [n, k] (any strides) reordered into oneDNN's blocked layout for products of about
// `rows` rows: an opaque MKLDNN tensor. Products on it have the bits of products on the weight
// as it is, for any row count (checked on GPT-2's, ViT-base's and MiniLM's shapes).
at::Tensor onednn_reorder(const c10::OperatorHandle& op, const at::Tensor& weight, int64_t rows) {
  torch::jit::Stack stack{weight, rows};
  op.callBoxed(&stack);
  return stack.front().toTensor();
}

// x [m, k] . weight^T + bias, weight [n, k] plain or reordered: oneDNN's inner product.
at::Tensor onednn_linear(const c10::OperatorHandle& op, const at::Tensor& x,
                         const at::Tensor& weight, const at::Tensor& bias) {
  torch::jit::Stack stack{x,
                          weight,
                          bias.defined() ? c10::IValue(bias) : c10::IValue(),
                          c10::IValue("none"),  // no fused activation
                          c10::IValue(c10::List<std::optional<at::Scalar>>()),
                          c10::IValue()};
  op.callBoxed(&stack);
  return stack.front().toTensor();
}

}  // namespace

at::Tensor onednn_packed_linear(const at::Tensor& x, const at::Tensor& weight,
                                const at::Tensor& bias, bool k_major) {
  static const std::optional<c10::OperatorHandle> linear_op =
      find_onednn_op("mkldnn::_linear_pointwise");
  static const std::optional<c10::OperatorHandle> reorder_op =
      find_onednn_op("mkldnn::_reorder_linear_weight");
  if (kernels::gemm_backend() != kernels::GemmBackend::kOneDnn || !linear_op || !reorder_op) {
    return {};
  }
  const int64_t m = packable_rows(x, weight, bias, k_major);
  if (m == 0) return {};
  const at::Tensor w = k_major ? weight.t() : weight;  // [n, k]
  const at::Tensor packed = packed_weight(weight, k_major, m, PackFormat::kOneDnn, weight.nbytes(),
                                          [&] { return onednn_reorder(*reorder_op, w, m); });
  const int64_t k = w.size(1), n = w.size(0);
  auto shape = x.sizes().vec();
  shape.back() = n;
  const at::Tensor b = bias.defined() ? bias.contiguous() : bias;
  return onednn_linear(*linear_op, x.reshape({m, k}), packed.defined() ? packed : w, b).view(shape);
}

}  // namespace shardformer::layers

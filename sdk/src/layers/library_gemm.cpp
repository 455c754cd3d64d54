// The GEMM library behind the SDK's products: the selection rule, and the autograd node that
// runs a linear layer's forward and backward on it.
#include "library_gemm.h"

#include "amx_packed.h"
#include "mkl_packed.h"
#include "onednn_packed.h"

#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>

#include <initializer_list>
#include <optional>

namespace shardformer::layers {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool serves(std::initializer_list<at::Tensor> tensors) {
  if (!kernels::gemm_enabled()) return false;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && (!t.device().is_cpu() || t.scalar_type() != at::kFloat)) return false;
  }
  return true;
}

// ATen's CPU products in bf16 run a reference loop (cpublas' gemm_impl) unless oneDNN serves
// bf16, as it does on AVX-512 CPUs (F, BW, VL, DQ). Elsewhere a bf16 training step spent 78% of
// its time in that loop (AVX2 Zen 3), so training's bf16 products run in fp32 and round the
// result once: oneDNN's arithmetic too (fp32 sums, one rounding), on the fp32 products' path.
// fp16 stays on ATen's loop: with fp32 products T5's 100-step fp16 curve ended 8.4e-4 from
// torch's fp32 one, past the 5e-4 its test holds (docs/training.md).
// Other architectures keep ATen's bf16 products: that loop was measured on x86 only.
bool widens_bf16(std::initializer_list<at::Tensor> tensors) {
#if defined(__x86_64__)
  static const bool onednn_serves = __builtin_cpu_supports("avx512bw") &&
                                    __builtin_cpu_supports("avx512vl") &&
                                    __builtin_cpu_supports("avx512dq");
#else
  constexpr bool onednn_serves = true;
#endif
  if (onednn_serves) return false;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && (!t.device().is_cpu() || t.scalar_type() != at::kBFloat16)) return false;
  }
  return true;
}

at::Tensor fp32_copy(const at::Tensor& t) { return t.defined() ? t.to(at::kFloat) : t; }

// Training's products (a recorded gradient, and the products of backward passes) stay on MKL where
// the AMX tiles run inference's: splitting and laying out a new B at every call cost more than the
// tiles gained (GPT-2-small's training step on a 2-core Xeon: 1.08x HF on the tiles, 1.33x on
// MKL, 2026-12-07).
bool trains_on_library() {
  return kernels::gemm_enabled() && kernels::gemm_backend() != kernels::GemmBackend::kAmx;
}

bool records_grad(std::initializer_list<at::Tensor> tensors) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

struct LibraryLinear : torch::autograd::Function<LibraryLinear> {
  // bias: an optional, since an undefined tensor cannot be an autograd node's input.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, bool k_major) {
    ctx->save_for_backward({x, weight});
    ctx->saved_data["k_major"] = k_major;
    ctx->saved_data["bias"] = bias.has_value();
    return kernels::linear(x, weight, bias ? bias->contiguous() : at::Tensor(), k_major);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];       // [..., k]
    const at::Tensor& weight = saved[1];  // [n, k] or [k, n]
    const bool k_major = ctx->saved_data["k_major"].toBool();
    const int64_t k = x.size(-1);
    const at::Tensor dy = grads[0].reshape({-1, grads[0].size(-1)});  // [tokens, n]
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {  // [tokens, n] . W -> [tokens, k]
      dx = library_mm(dy, k_major ? weight.t() : weight).view(x.sizes());
    }
    if (ctx->needs_input_grad(1)) {
      const at::Tensor x2 = x.reshape({-1, k});                        // [tokens, k]
      dw = k_major ? library_mm(x2.t(), dy) : library_mm(dy.t(), x2);  // the weight's layout
    }
    // Edges follow the tensor inputs: the bias's is the third when there is one.
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) db = dy.sum(0);
    return {dx, dw, db, at::Tensor()};
  }
};

}  // namespace

at::Tensor library_mm(const at::Tensor& a, const at::Tensor& b) {
  if (!serves({a, b}) || !trains_on_library() || records_grad({a, b})) return at::mm(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  kernels::gemm(a, b, {}, false, out);
  return out;
}

at::Tensor linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                          bool k_major) {
  if (widens_bf16({x, weight, bias}) && records_grad({x, weight, bias})) {
    // Training: the gradients come back through the casts, rounded once each. Inference keeps
    // ATen's loop, whose sums are HF's on the same CPU to the bit (GPT2Test's dtype jobs).
    return linear_product(fp32_copy(x), fp32_copy(weight), fp32_copy(bias), k_major)
        .to(at::kBFloat16);
  }
  if (serves({x, weight, bias}) && weight.dim() == 2) {
    if (!records_grad({x, weight, bias})) {
      // Inference products on weights packed once: the AMX tiles' parts or oneDNN's reordered
      // weights (each returns undefined under the other backend).
      if (at::Tensor y = amx_packed_linear(x, weight, bias, k_major); y.defined()) return y;
      if (at::Tensor y = onednn_packed_linear(x, weight, bias, k_major); y.defined()) return y;
      return kernels::linear(x, weight, bias.defined() ? bias.contiguous() : bias, k_major);
    }
    if (trains_on_library()) {
      return LibraryLinear::apply(
          x, weight, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt, k_major);
    }
  }
  // Intel's CPUs (MKL's own code): products without gradients on weights packed once.
  if (at::Tensor y = mkl_packed_linear(x, weight, bias, k_major); y.defined()) return y;
  if (!k_major) return bias.defined() ? at::linear(x, weight, bias) : at::matmul(x, weight.t());
  auto out_shape = x.sizes().vec();
  out_shape.back() = weight.size(1);
  const at::Tensor flat = x.reshape({-1, weight.size(0)});
  // HF's Conv1D: addmm over the flattened leading dimensions.
  return (bias.defined() ? at::addmm(bias, flat, weight) : at::mm(flat, weight)).view(out_shape);
}

}  // namespace shardformer::layers

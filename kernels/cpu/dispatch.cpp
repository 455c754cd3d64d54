// The kernels' tensor entry points (cpu_kernels.h): shape checks, output allocation, the
// instruction-set table chosen once from LibTorch's CPU capability, and the GEMM backend.
#include "blas_gemm.h"
#include "environment_choice.h"
#include "kernel_table.h"
#include "kernel_time_scope.h"
#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <string>

// oneDNN's matmul as ATen calls it for bf16 products (ATen/native/mkldnn/Matmul.h, a header the
// wheel does not ship; libtorch_cpu exports the function): result = beta * result + alpha * mat1
// . mat2, any strides (copied where oneDNN cannot read them), on ATen's OpenMP threads.
namespace at::native {
TORCH_API void mkldnn_matmul(const at::Tensor& mat1, const at::Tensor& mat2,
                             const at::Tensor& result, float beta, float alpha);
}

namespace shardformer::kernels {
namespace {

const KernelTable& active_table() {
  // A pointer, not a reference: GCC 13 takes a reference bound to a lambda's result for a
  // dangling temporary (-Wdangling-reference).
  static const KernelTable* const table = []() -> const KernelTable* {
#if defined(__x86_64__)
    const std::string cap = at::get_cpu_capability();
    if (cap == "AVX512") return &AVX512::table;
    if (cap == "AVX2") return &AVX2::table;
#endif
    return &DEFAULT::table;
  }();
  return *table;
}

bool cpu_float_contiguous(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

void check_vector(const at::Tensor& v, int64_t n, const char* what) {
  TORCH_CHECK(!v.defined() || (cpu_float_contiguous(v) && v.dim() == 1 && v.size(0) == n), what,
              " must be a contiguous fp32 CPU vector of ", n, " elements");
}

const float* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

}  // namespace

std::string capability() {
  const KernelTable* t = &active_table();
#if defined(__x86_64__)
  if (t == &AVX512::table) return "AVX512";
  if (t == &AVX2::table) return "AVX2";
#endif
  return "DEFAULT";
}

namespace {

// The choice from the environment and the CPU, made at the first product.
GemmBackend chosen_backend() {
  const std::string choice =
      environment_choice("SHARDFORMER_CPU_GEMM", {"amx", "openblas", "onednn", "aten"});
  if (choice == "amx") {
    TORCH_CHECK(amx_available(),
                "SHARDFORMER_CPU_GEMM is 'amx': this CPU or its OS offers no AMX-BF16 tiles");
    return GemmBackend::kAmx;
  }
  if (choice == "openblas") return GemmBackend::kOpenBlas;
  if (choice == "aten") return GemmBackend::kAten;
  if (choice == "onednn") return GemmBackend::kOneDnn;
#if defined(__x86_64__)
  // Measured per kind of CPU (bench/gemm_libraries.py, docs/benchmarks.md). CPUs with AMX-BF16
  // tiles: the tiles' bf16x6 products, 1.1-1.7x MKL on GPT-2's shapes of a Sapphire-Rapids-class
  // Xeon (kernel_speed --amx), where no library runs fp32 products on the tiles. Intel's: MKL runs
  // its own AVX-512 code there, 0.97-1.54x the project's former packed GEMM (an Emerald Rapids
  // Xeon), oneDNN 43-78% of the peak. AVX-512 CPUs of other makers: oneDNN, where MKL runs AVX2
  // code; on a Zen 4 level with that packed GEMM on GPT-2's forward, 1.05x on ViT-base one image
  // at a time and 1.05-1.08x on a training step (on a Zen 5 its products ran at 83-99% of the
  // peak, the packed GEMM's 74-94%). AVX2-only CPUs of other makers: OpenBLAS, level with MKL on
  // GPT-2's layer products and 1.36x it on the LM head, where MKL drops to 64% of the FMA peak (a
  // Zen 3: 91-93% of the peak on every shape, oneDNN 47-77%, the packed GEMM's AVX2 tiles 83-88%).
  if (amx_available()) return GemmBackend::kAmx;
  __builtin_cpu_init();
  if (__builtin_cpu_is("intel")) return GemmBackend::kAten;
  return capability() == "AVX512" ? GemmBackend::kOneDnn : GemmBackend::kOpenBlas;
#else
  return GemmBackend::kAten;
#endif
}

std::atomic<GemmBackend>& backend_slot() {
  static std::atomic<GemmBackend> slot{chosen_backend()};
  return slot;
}

}  // namespace

GemmBackend gemm_backend() { return backend_slot().load(std::memory_order_relaxed); }

GemmBackend set_gemm_backend(GemmBackend backend) {
  TORCH_CHECK(backend != GemmBackend::kAmx || amx_available(),
              "set_gemm_backend: this CPU or its OS offers no AMX-BF16 tiles");
  return backend_slot().exchange(backend);
}

bool gemm_enabled() { return gemm_backend() != GemmBackend::kAten; }

std::string gemm_name() {
  switch (gemm_backend()) {
    case GemmBackend::kOpenBlas: return blas_name();
    case GemmBackend::kOneDnn: return "oneDNN (LibTorch's matmul)";
    case GemmBackend::kAmx:
      return "AMX tiles (bf16x6) on packed weights, ATen's GEMM (" + capability() +
             " kernels) elsewhere";
    case GemmBackend::kAten: break;
  }
  return "ATen's GEMM (" + capability() + " kernels)";
}

namespace {

bool cpu_float(const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; }

}  // namespace

void gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, bool accumulate,
          const at::Tensor& out) {
  TORCH_CHECK(cpu_float(a) && cpu_float(b) && cpu_float(out) && a.dim() == 2 && b.dim() == 2 &&
                  out.dim() == 2 && a.size(1) == b.size(0) && out.size(0) == a.size(0) &&
                  out.size(1) == b.size(1),
              "gemm: a ", a.sizes(), " . b ", b.sizes(), " into out ", out.sizes(),
              " must be fp32 CPU matrices [m, k] . [k, n] -> [m, n]");
  TORCH_CHECK(out.size(1) <= 1 || out.stride(1) == 1, "gemm: out's rows must be contiguous");
  const int64_t m = a.size(0), k = a.size(1), n = out.size(1);
  check_vector(bias, n, "gemm: bias");
  if (m == 0 || n == 0) return;
  const KernelTimeScope timed([&] {
    return kernel_call(k > 1 && a.stride(1) != 1 ? "gemm_a_transposed" : "gemm",
                       {{"m", m}, {"k", k}, {"n", n}});
  });
  if (gemm_backend() == GemmBackend::kOpenBlas) {
    blas_gemm(a, b, bias, accumulate, out, at::get_num_threads());
    return;
  }
  // oneDNN and ATen: the bias goes into out first and the product is added to it (beta 1). The
  // AMX backend's products reach the tiles only from weights laid out once (the SDK's inference
  // products, amx_linear): here, where B is new at each call, MKL's GEMM serves. Splitting and
  // laying out B per call (amx_gemm) cost more than the tiles gained: a ViT-base image's first
  // pass, a GPT-2-small training step at 1.08x HF against MKL's 1.33x (a 2-core Xeon, 2026-12-07).
  if (bias.defined() && accumulate) {
    out.add_(bias);
  } else if (bias.defined()) {
    out.copy_(bias.expand_as(out));
  }
  const float beta = bias.defined() || accumulate ? 1.F : 0.F;
  if (gemm_backend() == GemmBackend::kOneDnn) {
    at::native::mkldnn_matmul(a, b, out, beta, 1.F);
  } else {
    out.addmm_(a, b, beta, 1.F);
  }
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool k_major) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2 && weight.size(k_major ? 0 : 1) == x.size(-1),
              "linear: weight ", weight.sizes(), " does not take x ", x.sizes());
  const int64_t k = x.size(-1), n = weight.size(k_major ? 1 : 0);
  auto shape = x.sizes().vec();
  shape.back() = n;
  at::Tensor y = at::empty(shape, x.options());
  gemm(x.reshape({-1, k}), k_major ? weight : weight.t(), bias, false, y.view({-1, n}));
  return y;
}

bool block_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat || t->dim() != 4 ||
        (t->size(3) > 1 && t->stride(3) != 1)) {
      return false;
    }
  }
  return k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(1) == q.size(1) &&
         k.size(3) == q.size(3) && q.size(3) <= kMaxBlockAttentionDim;
}

at::Tensor block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, bool causal, const at::Tensor& key_counts) {
  TORCH_CHECK(block_attention_applies(q, k, v), "block_attention: q ", q.sizes(), ", k ", k.sizes(),
              " and v ", v.sizes(),
              " must be fp32 CPU tensors [batch, heads, queries or keys, dim] of one batch, heads "
              "and dim (at most ",
              kMaxBlockAttentionDim, "), k and v of one shape, dim contiguous");
  TORCH_CHECK(!causal || q.size(2) == k.size(2), "block_attention: causal attention needs as many ",
              "queries as keys, not ", q.size(2), " and ", k.size(2));
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), keys = k.size(2),
                dim = q.size(3);
  if (key_counts.defined()) {
    TORCH_CHECK(!causal, "block_attention: key counts are for attention over every key");
    TORCH_CHECK(key_counts.device().is_cpu() && key_counts.scalar_type() == at::kLong &&
                    key_counts.dim() == 1 && key_counts.size(0) == batch &&
                    key_counts.is_contiguous(),
                "block_attention: key counts must be a contiguous int64 CPU tensor [", batch,
                "], not ", key_counts.sizes());
    TORCH_CHECK(batch == 0 || (key_counts.min().item<int64_t>() >= 0 &&
                               key_counts.max().item<int64_t>() <= keys),
                "block_attention: key counts must lie in [0, ", keys, "]");
  }
  const at::Tensor out = at::empty({batch, queries, heads, dim}, q.options()).transpose(1, 2);
  if (out.numel() == 0) return out;
  if (keys == 0) return out.zero_();  // no key to see: zeros, as a query that sees none
  const auto strides = [](const at::Tensor& t) {
    return AttentionStrides{t.stride(0), t.stride(1), t.stride(2)};
  };
  const KernelTimeScope timed([&] {
    return kernel_call("block_attention", {{"batch", batch},
                                           {"heads", heads},
                                           {"queries", queries},
                                           {"keys", keys},
                                           {"dim", dim},
                                           {"causal", causal ? 1 : 0}});
  });
  const int64_t* counts = key_counts.defined() ? key_counts.data_ptr<int64_t>() : nullptr;
  const AttentionShape shape{batch,      heads,      queries,      keys,   dim,   strides(q),
                             strides(k), strides(v), strides(out), causal, counts};
  active_table().block_attention(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                 out.data_ptr<float>(), shape, static_cast<float>(scale));
  return out;
}

bool cached_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& mask) {
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (!t->device().is_cpu() || t->scalar_type() != at::kFloat || t->dim() != 4 ||
        (t->size(3) > 1 && t->stride(3) != 1)) {
      return false;
    }
  }
  const int64_t batch = q.size(0), queries = q.size(2), keys = k.size(2);
  if (k.sizes() != v.sizes() || k.size(0) != batch || k.size(3) != q.size(3) || k.size(1) == 0 ||
      q.size(1) % k.size(1) != 0) {
    return false;
  }
  if (!mask.defined()) return true;
  return mask.device().is_cpu() && mask.scalar_type() == at::kBool && mask.dim() == 4 &&
         (mask.size(0) == batch || mask.size(0) == 1) && mask.size(1) == 1 &&
         (mask.size(2) == queries || mask.size(2) == 1) && mask.size(3) == keys &&
         (keys <= 1 || mask.stride(3) == 1);
}

at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask, double scale, bool causal) {
  TORCH_CHECK(cached_attention_applies(q, k, v, mask), "cached_attention: q ", q.sizes(), ", k ",
              k.sizes(), ", v ", v.sizes(), " and mask ",
              mask.defined() ? mask.sizes() : at::IntArrayRef{},
              " must be fp32 CPU tensors [batch, heads, queries, dim], [batch, kv_heads, keys, dim]"
              " (dim contiguous) and a boolean mask [batch, 1, queries, keys]");
  const int64_t batch = q.size(0), heads = q.size(1), queries = q.size(2), dim = q.size(3);
  const at::Tensor out = at::empty({batch, queries, heads, dim}, q.options());
  if (out.numel() == 0) return out.view({batch, queries, heads * dim});
  const auto strides = [](const at::Tensor& t) {
    return AttentionStrides{t.stride(0), t.stride(1), t.stride(2)};
  };
  const KernelTimeScope timed([&] {
    return kernel_call("cached_attention", {{"batch", batch},
                                            {"heads", heads},
                                            {"queries", queries},
                                            {"keys", k.size(2)},
                                            {"dim", dim}});
  });
  const auto broadcast_stride = [&](int64_t d) { return mask.size(d) == 1 ? 0 : mask.stride(d); };
  const CachedAttentionShape shape{.batch = batch,
                                   .heads = heads,
                                   .kv_heads = k.size(1),
                                   .queries = queries,
                                   .keys = k.size(2),
                                   .dim = dim,
                                   .q = strides(q),
                                   .k = strides(k),
                                   .v = strides(v),
                                   .out = strides(out.transpose(1, 2)),
                                   .mask_batch = mask.defined() ? broadcast_stride(0) : 0,
                                   .mask_query = mask.defined() ? broadcast_stride(2) : 0,
                                   .causal = causal};
  active_table().cached_attention(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(),
                                  mask.defined() ? mask.data_ptr<bool>() : nullptr,
                                  out.data_ptr<float>(), shape, static_cast<float>(scale));
  return out.view({batch, queries, heads * dim});
}

bool skinny_linear_applies(const at::Tensor& x, const at::Tensor& weight) {
  return cpu_float_contiguous(x) && cpu_float_contiguous(weight) && weight.dim() == 2 &&
         x.dim() >= 1 && x.numel() / std::max<int64_t>(x.size(-1), 1) <= kSkinnyRows;
}

at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         bool k_major) {
  TORCH_CHECK(skinny_linear_applies(x, weight), "skinny_linear: x ", x.sizes(), " and weight ",
              weight.sizes(), " must be contiguous fp32 CPU tensors with at most ", kSkinnyRows,
              " rows");
  const int64_t k = x.size(-1);
  const int64_t n = weight.size(k_major ? 1 : 0);
  TORCH_CHECK(weight.size(k_major ? 0 : 1) == k, "skinny_linear: weight ", weight.sizes(),
              " does not take ", k, " input features");
  check_vector(bias, n, "skinny_linear: bias");
  auto shape = x.sizes().vec();
  shape.back() = n;
  at::Tensor y = at::empty(shape, x.options());
  const int64_t rows = x.numel() / std::max<int64_t>(k, 1);
  const KernelTimeScope timed([&] {
    return kernel_call("skinny_linear", {{"rows", rows}, {"k", k}, {"n", n}});
  });
  active_table().skinny_linear(x.data_ptr<float>(), x.numel() / std::max<int64_t>(k, 1), k,
                               weight.data_ptr<float>(), n, k_major, data_or_null(bias),
                               y.data_ptr<float>());
  return y;
}

std::vector<at::Tensor> skinny_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases) {
  TORCH_CHECK(!weights.empty() && biases.size() == weights.size(),
              "skinny_products: one bias (or an undefined tensor) per weight");
  const int64_t k = x.size(-1), rows = x.numel() / std::max<int64_t>(k, 1);
  std::vector<const float*> w, b;
  std::vector<int64_t> n;
  std::vector<at::Tensor> y;
  std::vector<float*> out;
  for (size_t i = 0; i < weights.size(); ++i) {
    TORCH_CHECK(skinny_linear_applies(x, weights[i]) && weights[i].size(1) == k,
                "skinny_products: x ", x.sizes(), " and weight ", weights[i].sizes(),
                " must be contiguous fp32 CPU tensors [rows <= ", kSkinnyRows, ", k] and [n, k]");
    check_vector(biases[i], weights[i].size(0), "skinny_products: bias");
    auto shape = x.sizes().vec();
    shape.back() = weights[i].size(0);
    y.push_back(at::empty(shape, x.options()));
    w.push_back(weights[i].data_ptr<float>());
    b.push_back(data_or_null(biases[i]));
    n.push_back(weights[i].size(0));
    out.push_back(y.back().data_ptr<float>());
  }
  const KernelTimeScope timed([&] {
    return kernel_call(
        "skinny_products",
        {{"rows", rows}, {"k", k}, {"weights", static_cast<int64_t>(weights.size())}});
  });
  active_table().skinny_group(x.data_ptr<float>(), rows, k, static_cast<int64_t>(weights.size()),
                              w.data(), n.data(), b.data(), out.data());
  return y;
}

at::Tensor skinny_silu_gate(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& b_gate,
                            const at::Tensor& w_up, const at::Tensor& b_up) {
  const int64_t k = x.size(-1), rows = x.numel() / std::max<int64_t>(k, 1);
  TORCH_CHECK(skinny_linear_applies(x, w_gate) && skinny_linear_applies(x, w_up) &&
                  w_gate.sizes() == w_up.sizes() && w_gate.size(1) == k,
              "skinny_silu_gate: x ", x.sizes(), ", gate ", w_gate.sizes(), " and up ",
              w_up.sizes(), " must be contiguous fp32 CPU tensors [rows <= ", kSkinnyRows,
              ", k] and two [n, k]");
  const int64_t n = w_gate.size(0);
  check_vector(b_gate, n, "skinny_silu_gate: gate bias");
  check_vector(b_up, n, "skinny_silu_gate: up bias");
  auto shape = x.sizes().vec();
  shape.back() = n;
  at::Tensor h = at::empty(shape, x.options());
  const at::Tensor up = at::empty({rows, n}, x.options());
  const KernelTimeScope timed([&] {
    return kernel_call("skinny_silu_gate", {{"rows", rows}, {"k", k}, {"n", n}});
  });
  active_table().skinny_silu_gate(x.data_ptr<float>(), rows, k, w_gate.data_ptr<float>(),
                                  data_or_null(b_gate), w_up.data_ptr<float>(), data_or_null(b_up),
                                  n, up.data_ptr<float>(), h.data_ptr<float>());
  return h;
}

namespace {

// The terms' data, each checked to be a contiguous fp32 CPU tensor of out's shape.
std::vector<const float*> term_pointers(const std::vector<at::Tensor>& terms, const at::Tensor& out,
                                        const char* what) {
  std::vector<const float*> data;
  for (const at::Tensor& t : terms) {
    TORCH_CHECK(cpu_float_contiguous(t) && t.sizes() == out.sizes(), what, ": a term ", t.sizes(),
                " must be a contiguous fp32 CPU tensor of the output's shape ", out.sizes());
    data.push_back(t.data_ptr<float>());
  }
  return data;
}

}  // namespace

void sum_terms(const std::vector<at::Tensor>& terms, const at::Tensor& bias,
               const at::Tensor& out) {
  TORCH_CHECK(terms.size() >= 2 && cpu_float_contiguous(out) && out.dim() >= 1,
              "sum_terms: at least two terms and a contiguous fp32 CPU output");
  const std::vector<const float*> data = term_pointers(terms, out, "sum_terms");
  const int64_t cols = out.size(-1);
  check_vector(bias, cols, "sum_terms: bias");
  const int64_t rows = out.numel() / std::max<int64_t>(cols, 1);
  const KernelTimeScope timed([&] {
    return kernel_call(
        "sum_terms",
        {{"terms", static_cast<int64_t>(data.size())}, {"rows", rows}, {"cols", cols}});
  });
  active_table().sum_terms(data.data(), static_cast<int64_t>(data.size()), data_or_null(bias),
                           out.data_ptr<float>(), rows, cols);
}

void sum_add_norm(const std::vector<at::Tensor>& terms, const at::Tensor& bias,
                  const at::Tensor& residual, NormKind kind, const at::Tensor& weight,
                  const at::Tensor& norm_bias, double eps, const at::Tensor& sum,
                  const at::Tensor& y) {
  TORCH_CHECK(!terms.empty() && cpu_float_contiguous(sum) && sum.dim() >= 1 &&
                  cpu_float_contiguous(residual) && residual.sizes() == sum.sizes(),
              "sum_add_norm: at least one term, and a residual and a sum that are contiguous "
              "fp32 CPU tensors of one shape");
  const std::vector<const float*> data = term_pointers(terms, sum, "sum_add_norm");
  const int64_t cols = sum.size(-1);
  check_vector(bias, cols, "sum_add_norm: bias");
  check_vector(weight, cols, "sum_add_norm: weight");
  check_vector(norm_bias, cols, "sum_add_norm: norm_bias");
  TORCH_CHECK(weight.defined() == y.defined() && (!norm_bias.defined() || weight.defined()),
              "sum_add_norm: a norm needs its weight and an output y, and only then a bias");
  TORCH_CHECK(kind == NormKind::kLayerNorm || !norm_bias.defined(),
              "sum_add_norm: an RMSNorm has no bias");
  TORCH_CHECK(!y.defined() || (cpu_float_contiguous(y) && y.sizes() == sum.sizes()),
              "sum_add_norm: y must be a contiguous fp32 CPU tensor of the sum's shape");
  const int64_t rows = sum.numel() / std::max<int64_t>(cols, 1);
  const KernelTimeScope timed([&] {
    return kernel_call(
        "sum_add_norm",
        {{"terms", static_cast<int64_t>(data.size())}, {"rows", rows}, {"cols", cols}});
  });
  active_table().sum_add_norm(data.data(), static_cast<int64_t>(data.size()), data_or_null(bias),
                              residual.data_ptr<float>(), kind == NormKind::kRMSNorm,
                              data_or_null(weight), data_or_null(norm_bias), sum.data_ptr<float>(),
                              y.defined() ? y.data_ptr<float>() : nullptr, rows, cols,
                              static_cast<float>(eps));
}

at::Tensor bias_gelu_tanh(const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(cpu_float_contiguous(x) && x.dim() >= 1,
              "bias_gelu_tanh: x must be a contiguous fp32 CPU tensor");
  const int64_t cols = x.size(-1);
  check_vector(bias, cols, "bias_gelu_tanh: bias");
  at::Tensor y = at::empty_like(x);
  const int64_t rows = x.numel() / std::max<int64_t>(cols, 1);
  const KernelTimeScope timed([&] {
    return kernel_call("bias_gelu_tanh", {{"rows", rows}, {"cols", cols}});
  });
  active_table().bias_gelu_tanh(x.data_ptr<float>(), data_or_null(bias), y.data_ptr<float>(), rows,
                                cols);
  return y;
}

at::Tensor gelu_tanh_backward(const at::Tensor& x, const at::Tensor& grad) {
  TORCH_CHECK(cpu_float_contiguous(x) && cpu_float_contiguous(grad) && x.sizes() == grad.sizes(),
              "gelu_tanh_backward: x ", x.sizes(), " and grad ", grad.sizes(),
              " must be contiguous fp32 CPU tensors of one shape");
  at::Tensor dx = at::empty_like(x);
  const KernelTimeScope timed([&] {
    return kernel_call("gelu_tanh_backward", {{"elements", x.numel()}});
  });
  active_table().gelu_tanh_backward(x.data_ptr<float>(), grad.data_ptr<float>(),
                                    dx.data_ptr<float>(), x.numel());
  return dx;
}

std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& residual,
                                                 const at::Tensor& weight, const at::Tensor& bias,
                                                 double eps) {
  TORCH_CHECK(cpu_float_contiguous(x) && cpu_float_contiguous(residual) &&
                  x.sizes() == residual.sizes() && x.dim() >= 1,
              "add_layer_norm: x ", x.sizes(), " and residual ", residual.sizes(),
              " must be contiguous fp32 CPU tensors of one shape");
  const int64_t cols = x.size(-1);
  check_vector(weight, cols, "add_layer_norm: weight");
  TORCH_CHECK(weight.defined(), "add_layer_norm: weight is required");
  check_vector(bias, cols, "add_layer_norm: bias");
  at::Tensor sum = at::empty_like(x), y = at::empty_like(x);
  const int64_t rows = x.numel() / std::max<int64_t>(cols, 1);
  const KernelTimeScope timed([&] {
    return kernel_call("add_layer_norm", {{"rows", rows}, {"cols", cols}});
  });
  active_table().add_layer_norm(x.data_ptr<float>(), residual.data_ptr<float>(),
                                weight.data_ptr<float>(), data_or_null(bias), sum.data_ptr<float>(),
                                y.data_ptr<float>(), rows, cols, static_cast<float>(eps));
  return {sum, y};
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(cpu_float_contiguous(x) && x.dim() >= 1,
              "rms_norm: x must be a contiguous fp32 CPU tensor");
  const int64_t cols = x.size(-1);
  TORCH_CHECK(weight.defined(), "rms_norm: weight is required");
  check_vector(weight, cols, "rms_norm: weight");
  at::Tensor y = at::empty_like(x);
  const int64_t rows = x.numel() / std::max<int64_t>(cols, 1);
  const KernelTimeScope timed([&] {
    return kernel_call("rms_norm", {{"rows", rows}, {"cols", cols}});
  });
  active_table().rms_norm(x.data_ptr<float>(), weight.data_ptr<float>(), y.data_ptr<float>(), rows,
                          cols, static_cast<float>(eps));
  return y;
}

at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(cpu_float_contiguous(x) && cpu_float_contiguous(cos) && cpu_float_contiguous(sin) &&
                  x.dim() >= 2 && cos.dim() == x.dim() - 1 && cos.sizes() == sin.sizes(),
              "rotary: x ", x.sizes(), ", cos ", cos.sizes(), " and sin ", sin.sizes(),
              " must be contiguous fp32 CPU tensors [..., heads, head_dim] and [..., rotary_dim]");
  const int64_t head_dim = x.size(-1), rotary_dim = cos.size(-1);
  TORCH_CHECK(x.sizes().slice(0, x.dim() - 2) == cos.sizes().slice(0, cos.dim() - 1) &&
                  rotary_dim % 2 == 0 && rotary_dim <= head_dim,
              "rotary: cos ", cos.sizes(), " does not fit x ", x.sizes(),
              " (same tokens, an even rotary_dim of at most head_dim)");
  at::Tensor y = at::empty_like(x);
  const int64_t heads = x.size(-2);
  const int64_t tokens = x.numel() / std::max<int64_t>(heads * head_dim, 1);
  const KernelTimeScope timed([&] {
    return kernel_call(
        "rotary",
        {{"tokens", tokens}, {"heads", heads}, {"head_dim", head_dim}, {"rotary_dim", rotary_dim}});
  });
  active_table().rotary(x.data_ptr<float>(), cos.data_ptr<float>(), sin.data_ptr<float>(),
                        y.data_ptr<float>(), tokens, heads, head_dim, rotary_dim);
  return y;
}

bool softmax_cross_entropy_applies(const at::Tensor& logits) {
  return cpu_float_contiguous(logits) && logits.dim() == 2 && logits.size(1) > 0;
}

std::pair<at::Tensor, at::Tensor> softmax_stats(const at::Tensor& logits) {
  TORCH_CHECK(softmax_cross_entropy_applies(logits), "softmax_stats: logits ", logits.sizes(),
              " must be a contiguous fp32 CPU matrix with at least one column");
  const int64_t rows = logits.size(0);
  at::Tensor max = at::empty({rows}, logits.options()), sum = at::empty({rows}, logits.options());
  const KernelTimeScope timed([&] {
    return kernel_call("softmax_stats", {{"rows", rows}, {"cols", logits.size(1)}});
  });
  active_table().softmax_stats(logits.data_ptr<float>(), rows, logits.size(1),
                               max.data_ptr<float>(), sum.data_ptr<float>());
  return {max, sum};
}

at::Tensor softmax_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& max,
                                      const at::Tensor& sum, const at::Tensor& target,
                                      const at::Tensor& scale) {
  TORCH_CHECK(softmax_cross_entropy_applies(logits), "softmax_cross_entropy_grad: logits ",
              logits.sizes(), " must be a contiguous fp32 CPU matrix with at least one column");
  const int64_t rows = logits.size(0), cols = logits.size(1);
  check_vector(max, rows, "softmax_cross_entropy_grad: max");
  check_vector(sum, rows, "softmax_cross_entropy_grad: sum");
  check_vector(scale, rows, "softmax_cross_entropy_grad: scale");
  TORCH_CHECK(max.defined() && sum.defined() && scale.defined(),
              "softmax_cross_entropy_grad: max, sum and scale are required");
  TORCH_CHECK(target.device().is_cpu() && target.scalar_type() == at::kLong &&
                  target.is_contiguous() && target.dim() == 1 && target.size(0) == rows,
              "softmax_cross_entropy_grad: target must be a contiguous int64 CPU vector of ", rows,
              " elements");
  TORCH_CHECK(rows == 0 || target.max().item<int64_t>() < cols,
              "softmax_cross_entropy_grad: a target is past the ", cols, " columns");
  at::Tensor grad = at::empty_like(logits);
  const KernelTimeScope timed([&] {
    return kernel_call("softmax_cross_entropy_grad", {{"rows", rows}, {"cols", cols}});
  });
  active_table().softmax_xent_grad(logits.data_ptr<float>(), max.data_ptr<float>(),
                                   sum.data_ptr<float>(), target.data_ptr<int64_t>(),
                                   scale.data_ptr<float>(), grad.data_ptr<float>(), rows, cols);
  return grad;
}

}  // namespace shardformer::kernels

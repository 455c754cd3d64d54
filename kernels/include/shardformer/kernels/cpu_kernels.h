// Fused CPU kernels (no autograd of their own): the call into the chosen GEMM library, products
// with few rows (decoding), bias + tanh-GELU, residual add + LayerNorm, RMSNorm, rotary embedding,
// and the softmax cross-entropy's statistics and gradient. Each has an ATen reference in
// tests/kernels; the SDK calls them with gradients off or inside an autograd Function that supplies
// the backward, never plugins directly.
#pragma once

#include <ATen/Tensor.h>

#include <vector>

#include <string>
#include <utility>

namespace shardformer::kernels {

// The most rows skinny_linear takes; more rows are a GEMM's job.
inline constexpr int64_t kSkinnyRows = 32;

// Whether skinny_linear serves x [..., k] times this weight: CPU fp32, both contiguous, at most
// kSkinnyRows rows.
bool skinny_linear_applies(const at::Tensor& x, const at::Tensor& weight);

// y [..., n] = x [..., k] W^T + bias for weight [n, k] (k_major = false, nn.Linear), or
// x W + bias for weight [k, n] (k_major = true, HF's Conv1D). bias: [n] or undefined. Reads
// the weight once for all rows, split over the intra-op threads.
at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                         bool k_major);

// y_i [..., n_i] = x [..., k] W_i^T + bias_i for nn.Linear weights W_i [n_i, k] (bias_i [n_i]
// or undefined), in one pass of the threads over all the weights' rows: a decoding step's
// q / k / v. Each weight must pass skinny_linear_applies with x.
std::vector<at::Tensor> skinny_products(const at::Tensor& x, const std::vector<at::Tensor>& weights,
                                        const std::vector<at::Tensor>& biases);

// silu(x W_gate^T + b_gate) * (x W_up^T + b_up) for nn.Linear weights [n, k] of equal shape
// (biases [n] or undefined), in one pass of the threads: a gated MLP's decoding step, without
// its two products' outputs, the activation and the product as separate passes.
at::Tensor skinny_silu_gate(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& b_gate,
                            const at::Tensor& w_up, const at::Tensor& b_up);

// The library that runs `gemm` below and whether it serves the SDK's CPU fp32 products in place
// of ATen's own call into MKL, chosen once per process from the CPU (docs/benchmarks.md): AMX
// tiles (amx_gemm.h, bf16x6) where the CPU has AMX-BF16, for the SDK's inference products on
// weights laid out once (`gemm` itself runs ATen's there); oneDNN (LibTorch's own) on AVX-512 CPUs
// not made by Intel, where MKL runs its AVX2 code; OpenBLAS on AVX2-only CPUs not made by Intel;
// ATen's (MKL) on Intel's without AMX. The environment variable SHARDFORMER_CPU_GEMM = amx |
// openblas | onednn | aten overrides the choice.
enum class GemmBackend { kAten, kOpenBlas, kOneDnn, kAmx };
GemmBackend gemm_backend();
// Replaces the choice and returns the one it replaces: for tests and benchmarks, between
// products. kAmx is refused where amx_available() is false.
GemmBackend set_gemm_backend(GemmBackend backend);
bool gemm_enabled();  // gemm_backend() != kAten

// A line for the log: "OpenBLAS 0.3.34 (Haswell kernels)", "oneDNN (LibTorch's matmul)",
// "ATen's GEMM (AVX512 kernels)".
std::string gemm_name();

// out [m, n] (=|+=) a [m, k] . b [k, n] (+ bias [n]) on the chosen library: a and b of any
// strides (a transpose is a view, no copy), out with contiguous rows of any stride (a column
// slice of a wider matrix works); `accumulate` adds to out. CPU fp32 tensors; threads: ATen's
// intra-op count.
void gemm(const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias, bool accumulate,
          const at::Tensor& out);

// y [..., n] = x [..., k] W^T + bias for weight [n, k] (k_major = false, nn.Linear), or
// x W + bias for weight [k, n] (k_major = true, HF's Conv1D), by `gemm`.
at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                  bool k_major);

// Head sizes block_attention serves (its per-thread buffers grow with them; larger ones are
// left to SDPA).
constexpr int64_t kMaxBlockAttentionDim = 256;

// Whether block_attention serves q [batch, heads, queries, dim], k and v [batch, heads, keys,
// dim]: CPU fp32 tensors, k and v of one shape, dim at most kMaxBlockAttentionDim and contiguous.
bool block_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// softmax(q k^T * scale) v for every (batch, head), query i seeing every key or, causal (as many
// queries as keys: SDPA's is_causal), keys 0 .. i, or, given key_counts (int64 [batch], not
// causal), keys 0 .. key_counts[b] - 1 of batch b (right padding; none: zeros); in blocks of
// queries on the kernels' own register-tile GEMM (gemm_impl.cpp), which packs k once per head
// and keeps each block's scores in cache. Returns [batch, heads, queries, dim], laid out in memory
// as [batch, queries, heads, dim] so that merging the heads is a view. No autograd.
at::Tensor block_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, bool causal, const at::Tensor& key_counts = {});

// Whether cached_attention serves q [batch, heads, queries, dim], k and v [batch, kv_heads, keys,
// dim] and the mask: fp32 CPU tensors, each dim contiguous, heads a multiple of kv_heads, and
// the mask undefined or boolean [batch or 1, 1, queries or 1, keys] with the keys contiguous.
bool cached_attention_applies(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& mask);

// softmax(q k^T * scale) v for decoding: a few queries over a KV cache, head h reading KV head
// h / (heads / kv_heads) in place (no repeated keys), query i seeing key j where mask[b, 0, i, j]
// is true, or every key without a mask, and with `causal` only keys j <= keys - queries + i (the
// queries are the last positions); a query that sees none gets zeros. Returns [batch, queries,
// heads * dim]. No autograd.
at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& mask, double scale, bool causal = false);

// out = ((terms[0] + terms[1]) + ... ) + bias, in that order (every caller adding the same terms
// gets the same bits): terms of out's shape, bias [out.size(-1)] or undefined; contiguous fp32.
void sum_terms(const std::vector<at::Tensor>& terms, const at::Tensor& bias, const at::Tensor& out);

// The norm that sum_add_norm takes after the residual add.
enum class NormKind { kLayerNorm, kRMSNorm };

// sum = residual + (terms[0] + ... + terms[n-1] + bias) (n >= 1, added as sum_terms) and, where
// `weight` is defined, y = the norm of sum over the last dimension: LayerNorm(sum) * weight +
// norm_bias (as add_layer_norm) or weight * RMSNorm(sum) (as rms_norm; no norm_bias). A
// row-parallel layer's all-reduce, the residual add and the next norm in one pass, bit for bit
// the separate kernels. All contiguous fp32 CPU tensors of sum's shape; bias, weight, norm_bias
// [n] or undefined; y undefined without a weight.
void sum_add_norm(const std::vector<at::Tensor>& terms, const at::Tensor& bias,
                  const at::Tensor& residual, NormKind kind, const at::Tensor& weight,
                  const at::Tensor& norm_bias, double eps, const at::Tensor& sum,
                  const at::Tensor& y);

// gelu_tanh(x + bias) (HF's "gelu_new"), x [..., n] contiguous fp32, bias [n] or undefined.
at::Tensor bias_gelu_tanh(const at::Tensor& x, const at::Tensor& bias);

// grad * d/dx gelu_tanh(x) (the input gradient of HF's "gelu_new"); x, grad: one shape,
// contiguous fp32.
at::Tensor gelu_tanh_backward(const at::Tensor& x, const at::Tensor& grad);

// sum = x + residual and LayerNorm(sum) over the last dimension, in one pass over memory.
// x, residual: [..., n] contiguous fp32; weight, bias: [n] (bias may be undefined).
std::pair<at::Tensor, at::Tensor> add_layer_norm(const at::Tensor& x, const at::Tensor& residual,
                                                 const at::Tensor& weight, const at::Tensor& bias,
                                                 double eps);

// weight * x / sqrt(mean(x^2) + eps) over the last dimension (HF's Llama RMSNorm), x [..., n]
// contiguous fp32, weight [n].
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// HF's rotary embedding, x * cos + rotate_half(x) * sin, on x [..., heads, head_dim] with cos,
// sin [..., rotary_dim] over the same leading dimensions (the tokens); features past rotary_dim
// (even, at most head_dim) pass through. All contiguous fp32 CPU tensors.
at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// Whether the softmax cross-entropy kernels serve these logits: [rows, cols], contiguous fp32
// CPU.
bool softmax_cross_entropy_applies(const at::Tensor& logits);

// Per row of logits [rows, cols]: {max, sum of exp(logits - max)}, each [rows], in one read of
// the logits and no temporaries of their size.
std::pair<at::Tensor, at::Tensor> softmax_stats(const at::Tensor& logits);

// The gradient of loss[r] = log(sum[r]) + max[r] - logits[r, target[r]] times scale[r]:
// (exp(logits - max) / sum - one_hot(target)) * scale, [rows, cols]. max, sum, scale: [rows]
// fp32; target: [rows] int64, negative where the row has no target here (no one-hot).
at::Tensor softmax_cross_entropy_grad(const at::Tensor& logits, const at::Tensor& max,
                                      const at::Tensor& sum, const at::Tensor& target,
                                      const at::Tensor& scale);

// The instruction set the kernels run with here ("AVX512", "AVX2" or "DEFAULT"; LibTorch's
// ATEN_CPU_CAPABILITY environment variable lowers it).
std::string capability();

}  // namespace shardformer::kernels

// Tensor helpers shared by the SDK tests: values every rank draws alike, weights as a model holds
// them, a linear layer's fp64 reference, and the worst relative error against such a reference.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <cstdint>

namespace shardformer::testing {

// A normal tensor of `shape` drawn from its own generator: the same values on every rank.
inline at::Tensor seeded(int64_t seed, at::IntArrayRef shape) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, generator);
}

// A normal tensor of `shape` as a model's weight is: with a version counter, even when made
// inside a runtime::InferenceScope (c10::InferenceMode), whose own tensors have none.
inline at::Tensor model_weight(at::IntArrayRef shape) {
  const c10::InferenceMode off(false);
  return at::randn(shape);
}

// x [..., k] times w [n, k]^T (k_major false) or w [k, n] (true), plus b [n] (may be
// undefined), in double.
inline at::Tensor linear_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                                   bool k_major) {
  const at::Tensor wd = w.to(at::kDouble);
  at::Tensor y = at::matmul(x.to(at::kDouble), k_major ? wd : wd.t());
  return b.defined() ? y + b.to(at::kDouble) : y;
}

// The largest |got - want| relative to want's largest magnitude, in double.
inline double worst_relative(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs() / (want.abs().max() + 1e-30)).max().item<double>();
}

}  // namespace shardformer::testing

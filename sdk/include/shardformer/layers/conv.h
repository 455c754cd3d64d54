// Replicated convolutions under HF's names (weight, bias) for the small convolutional parts of
// models: Whisper's audio front end (Conv1d), SAM's neck, mask embedding and mask upscaling
// (Conv2d, ConvTranspose2d); and the channels-first LayerNorm that follows such maps.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/layer_norm.h"

#include <torch/nn/module.h>

#include <vector>

namespace shardformer::layers {

struct ConvOptions {
  int64_t in = 0, out = 0;
  std::vector<int64_t> kernel;  // one size per spatial dim: {3} is a Conv1d, {3, 3} a Conv2d
  int64_t stride = 1, padding = 0;
  bool bias = true;
  bool transposed = false;  // ConvTranspose2d: weight [in, out, kh, kw]
};

class Conv : public torch::nn::Module {
 public:
  // ctx: the convolution's module ("encoder.conv1"). Not split over tp: the policy may only
  // replicate it (ModelError otherwise).
  Conv(const BuildContext& ctx, const ConvOptions& options);
  // x [batch, in, spatial...] in any float dtype -> [batch, out, spatial'...] in the weight's
  at::Tensor forward(const at::Tensor& x) const;
  const at::Tensor& weight() const { return weight_; }

 private:
  ConvOptions options_;
  at::Tensor weight_, bias_;  // [out, in, kernel...] ([in, out, kernel...] transposed), [out]
};

// A LayerNorm over the channels of x [batch, channels, height, width] (HF's channels_first
// LayerNorm2d / SamLayerNorm) -> the same shape.
at::Tensor channel_norm(const LayerNorm& norm, const at::Tensor& x);

}  // namespace shardformer::layers

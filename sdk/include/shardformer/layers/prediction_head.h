// The small replicated MLP heads of detection and segmentation models (SAM's SamFeedForward,
// DETR-style box heads): `depth` linear layers with ReLU between them, read from proj_in,
// layers.0 ... layers.<depth - 3> and proj_out (or the family's names).
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

namespace shardformer::layers {

struct PredictionHeadOptions {
  int64_t in = 0, hidden = 0, out = 0;
  int64_t depth = 3;  // linear layers in all, at least 2
  std::string in_name = "proj_in", layers_name = "layers", out_name = "proj_out";
};

class PredictionHead : public torch::nn::Module {
 public:
  PredictionHead(const BuildContext& ctx, const PredictionHeadOptions& options);
  at::Tensor forward(const at::Tensor& x) const;  // [..., in] -> [..., out]

 private:
  std::vector<std::shared_ptr<Linear>> layers_;  // in, the hidden ones, out
};

// Random Fourier features of points (SAM's positional embedding, after Tancik et al.): points
// [..., 2] in [0, 1], gaussian [2, F] -> [..., 2F] = [sin(a), cos(a)], a = 2 pi (2 p - 1) G.
at::Tensor fourier_features(const at::Tensor& points, const at::Tensor& gaussian);

}  // namespace shardformer::layers

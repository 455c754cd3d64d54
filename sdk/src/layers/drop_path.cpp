// Stochastic depth (layers/drop_path.h).
#include "shardformer/layers/drop_path.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

namespace shardformer::layers {

DropPath::DropPath(const BuildContext& ctx, double p) : Dropout(ctx, p) {}

at::Tensor DropPath::forward(const at::Tensor& branch) {
  if (!active()) return branch;
  std::vector<int64_t> shape(static_cast<size_t>(branch.dim()), 1);
  shape.front() = branch.size(0);  // [batch, 1, ...]
  const double keep = 1.0 - p();
  const at::Tensor kept =
      at::floor(at::rand(shape, replicated_stream(), branch.options().dtype(at::kFloat)) + keep);
  return branch.div(keep) * kept.to(branch.scalar_type());
}

double drop_path_rate(double rate, int64_t index, int64_t count) {
  return rate * static_cast<double>(index) / static_cast<double>(std::max<int64_t>(count - 1, 1));
}

}  // namespace shardformer::layers

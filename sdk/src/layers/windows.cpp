// Window partitioning and Swin's shifted-window mask, as HF's modeling_swin computes them.
#include "shardformer/layers/windows.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::layers {

namespace {

void check_grid(const at::Tensor& x, int64_t window, const char* what) {
  if (x.dim() != 4 || window <= 0 || x.size(1) % window != 0 || x.size(2) % window != 0) {
    throw Error(shardformer::str(what,
                                 ": a [batch, height, width, channels] grid in whole windows of ",
                                 window, " is needed; got ", x.sizes()));
  }
}

}  // namespace

at::Tensor pad_to_windows(const at::Tensor& x, int64_t window) {
  const int64_t bottom = (window - x.size(1) % window) % window;
  const int64_t right = (window - x.size(2) % window) % window;
  if (bottom == 0 && right == 0) return x;
  return at::constant_pad_nd(x, {0, 0, 0, right, 0, bottom});
}

at::Tensor window_partition(const at::Tensor& x, int64_t window) {
  check_grid(x, window, "window_partition");
  const int64_t batch = x.size(0), height = x.size(1), width = x.size(2), channels = x.size(3);
  // [batch, height / w, w, width / w, w, channels] -> [batch, height / w, width / w, w, w, ...]
  return x.view({batch, height / window, window, width / window, window, channels})
      .transpose(2, 3)
      .reshape({-1, window * window, channels});
}

at::Tensor window_reverse(const at::Tensor& windows, int64_t window, int64_t height,
                          int64_t width) {
  const int64_t channels = windows.size(-1);
  return windows.view({-1, height / window, width / window, window, window, channels})
      .transpose(2, 3)
      .reshape({-1, height, width, channels});
}

at::Tensor attend_in_windows(const at::Tensor& x, int64_t window, int64_t shift,
                             const WindowAttend& attend) {
  const int64_t height = x.size(1), width = x.size(2);
  at::Tensor grid = pad_to_windows(x, window);
  const int64_t padded_height = grid.size(1), padded_width = grid.size(2);
  if (shift > 0) grid = at::roll(grid, {-shift, -shift}, {1, 2});
  at::Tensor out =
      window_reverse(attend(window_partition(grid, window), padded_height, padded_width), window,
                     padded_height, padded_width);
  if (shift > 0) out = at::roll(out, {shift, shift}, {1, 2});
  if (padded_height == height && padded_width == width) return out;
  return out.narrow(1, 0, height).narrow(2, 0, width);  // [batch, height, width, channels]
}

at::Tensor shifted_window_mask(int64_t height, int64_t width, int64_t window, int64_t shift,
                               const at::TensorOptions& options) {
  // Each position's region along one side: [0, n - window), [n - window, n - shift),
  // [n - shift, n); a token's region is row region * 3 + column region.
  const auto regions = [&](int64_t n) {
    const at::Tensor i = at::arange(n, at::kLong);
    return (i >= n - window).to(at::kLong) + (i >= n - shift).to(at::kLong);
  };
  const at::Tensor region =
      (regions(height).view({1, height, 1, 1}) * 3 + regions(width).view({1, 1, width, 1}))
          .to(at::kFloat);                                                  // [1, h, w, 1]
  const at::Tensor windows = window_partition(region, window).squeeze(-1);  // [windows, w^2]
  const at::Tensor differ = windows.unsqueeze(1) != windows.unsqueeze(2);   // [windows, w^2, w^2]
  return at::zeros(differ.sizes(), options.device(at::kCPU))
      .masked_fill_(differ, -100.0)
      .to(options.device());
}

}  // namespace shardformer::layers

// Window attention's reshapes (Swin; SAM's image encoder): a grid of tokens padded to whole
// windows and cut into them, put back together, and Swin's mask for shifted windows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace shardformer::layers {

// x [batch, height, width, channels] zero-padded at the bottom and right to multiples of
// `window` (HF's maybe_pad): [batch, ceil(height / window) window, ceil(width / window) window,
// channels]. x itself when nothing is missing.
at::Tensor pad_to_windows(const at::Tensor& x, int64_t window);

// x [batch, height, width, channels], height and width multiples of `window` ->
// [batch * windows, window * window, channels], the windows in row-major order per image.
at::Tensor window_partition(const at::Tensor& x, int64_t window);

// The reverse: [batch * windows, window * window, channels] -> [batch, height, width, channels].
at::Tensor window_reverse(const at::Tensor& windows, int64_t window, int64_t height, int64_t width);

// Swin's mask for a height x width grid (multiples of `window`) rolled by -shift in both
// directions: [windows, window^2, window^2] in `options`' dtype and device, 0 between two tokens
// of the same region before the roll and -100 between others (HF's value).
at::Tensor shifted_window_mask(int64_t height, int64_t width, int64_t window, int64_t shift,
                               const at::TensorOptions& options);

}  // namespace shardformer::layers

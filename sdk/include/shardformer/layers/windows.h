// Window attention's reshapes (Swin; SAM's image encoder): a grid of tokens padded to whole
// windows and cut into them, put back together, and Swin's mask for shifted windows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

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

// Attention within windows as Swin and SAM run it: x [batch, height, width, channels] padded to
// whole windows, rolled by -shift in both directions (0: not), cut into windows
// [batch * windows, window * window, channels] for `attend` (which returns the same shape),
// put back, rolled back and cropped to [batch, height, width, channels]. `attend` also gets the
// padded grid's height and width (for a per-window mask).
using WindowAttend =
    std::function<at::Tensor(const at::Tensor& windows, int64_t height, int64_t width)>;
at::Tensor attend_in_windows(const at::Tensor& x, int64_t window, int64_t shift,
                             const WindowAttend& attend);

// Swin's mask for a height x width grid (multiples of `window`) rolled by -shift in both
// directions: [windows, window^2, window^2] in `options`' dtype and device, 0 between two tokens
// of the same region before the roll and -100 between others (HF's value).
at::Tensor shifted_window_mask(int64_t height, int64_t width, int64_t window, int64_t shift,
                               const at::TensorOptions& options);

}  // namespace shardformer::layers

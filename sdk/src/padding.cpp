// Right and left padding of token-id lists into a batch.
#include "shardformer/padding.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer {
namespace {

PaddedBatch pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_token_id,
                bool left) {
  const auto batch = static_cast<int64_t>(sequences.size());
  int64_t width = 0;
  for (const auto& s : sequences) width = std::max<int64_t>(width, s.size());
  PaddedBatch result{at::full({batch, width}, pad_token_id, at::kLong),
                     at::zeros({batch, width}, at::kLong)};
  auto ids = result.input_ids.accessor<int64_t, 2>();
  auto mask = result.attention_mask.accessor<int64_t, 2>();
  for (int64_t row = 0; row < batch; ++row) {
    const auto& s = sequences[row];
    const int64_t offset = left ? width - static_cast<int64_t>(s.size()) : 0;
    for (size_t i = 0; i < s.size(); ++i) {
      ids[row][offset + static_cast<int64_t>(i)] = s[i];
      mask[row][offset + static_cast<int64_t>(i)] = 1;
    }
  }
  return result;
}

}  // namespace

PaddedBatch right_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_token_id) {
  return pad(sequences, pad_token_id, /*left=*/false);
}

PaddedBatch left_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_token_id) {
  return pad(sequences, pad_token_id, /*left=*/true);
}

}  // namespace shardformer

// Token-id lists made into a batch: right-padded for a forward pass (HF's tokenizers' default)
// or left-padded for generation (HF generate()), with the attention mask marking real tokens.
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace shardformer {

struct PaddedBatch {
  at::Tensor input_ids;       // [batch, max_len] int64, pad_token_id where padded
  at::Tensor attention_mask;  // [batch, max_len] int64, 1 = real token
};

PaddedBatch right_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_token_id);
PaddedBatch left_pad(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_token_id);

}  // namespace shardformer

// Image features in a language model's input (BLIP-2, LLaVA-style models): the prompt holds one
// placeholder token per image feature, and each row's placeholders take its image's features
// in order, as HF's masked_scatter of the inputs' embeddings does.
#pragma once

#include <ATen/Tensor.h>

#include <string>

namespace shardformer::vision {

// Throws Error naming `model`, the row and the id when a row of ids [batch, seq] holds other
// than `per_image` placeholders (image_token_id), or when the rows and the images differ in
// number; call it before computing the features.
void check_image_tokens(const at::Tensor& ids, int64_t images, int64_t image_token_id,
                        int64_t per_image, const std::string& model);

// embeds [batch, seq, hidden] of ids [batch, seq] with features [batch, per_image, hidden] in the
// placeholders' places -> [batch, seq, hidden] in embeds' dtype (checked as above).
at::Tensor splice_image_tokens(const at::Tensor& embeds, const at::Tensor& ids,
                               int64_t image_token_id, const at::Tensor& features,
                               const std::string& model);

}  // namespace shardformer::vision

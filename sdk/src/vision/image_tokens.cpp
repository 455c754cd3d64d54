// Image features spliced into the embeddings of a prompt's image tokens.
#include "shardformer/vision/image_tokens.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::vision {

void check_image_tokens(const at::Tensor& ids, int64_t images, int64_t image_token_id,
                        int64_t per_image, const std::string& model) {
  if (images != ids.size(0)) {
    throw Error(str(model, ": ", images, " images for ", ids.size(0),
                    " rows of input_ids (one image per row)"));
  }
  const at::Tensor per_row = (ids == image_token_id).sum(1).cpu();  // [batch]
  for (int64_t row = 0; row < ids.size(0); ++row) {
    const int64_t count = per_row[row].item<int64_t>();
    if (count != per_image) {
      throw Error(str(model, ": row ", row, " of input_ids holds ", count, " image tokens (id ",
                      image_token_id, "); the model puts ", per_image,
                      " image features in their place"));
    }
  }
}

at::Tensor splice_image_tokens(const at::Tensor& embeds, const at::Tensor& ids,
                               int64_t image_token_id, const at::Tensor& features,
                               const std::string& model) {
  check_image_tokens(ids, features.size(0), image_token_id, features.size(1), model);
  const at::Tensor placeholders = (ids == image_token_id).unsqueeze(-1);  // [batch, seq, 1]
  return embeds.masked_scatter(placeholders, features.to(embeds.scalar_type()));
}

}  // namespace shardformer::vision

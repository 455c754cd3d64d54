// BLIP-2 (HF Blip2ForConditionalGeneration): the vision encoder's features read by the Q-Former's
// query tokens, projected to the language model's width and put in place of the prompt's image
// tokens; the OPT causal LM (the OPT family's own classes) runs on the result. Generation keeps
// the images in the KV cache: steps after the first read token ids only.
#pragma once

#include "blip2_config.h"
#include "blip2_qformer.h"
#include "blip2_vision.h"
#include "shardformer/causal_lm.h"
#include "shardformer/layers/linear.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer::blip2 {

class Blip2ForConditionalGeneration : public Model {
 public:
  Blip2ForConditionalGeneration(const BuildContext& ctx, const Blip2Config& config);
  // input_ids [batch, seq] holding num_query_tokens image tokens per row (Blip2Processor puts
  // them first) with pixel_values [batch, channels, height, width]; a decoding step with a KV
  // cache that holds them takes input_ids alone. -> logits [batch, seq, vocab]
  at::Tensor forward(const ForwardInputs& inputs) override;
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels) override;
  ModelShape shape() const override { return language_model_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kCausalLM; }

  // pixel_values -> the query tokens' features projected for the language model
  // [batch, num_query_tokens, text hidden] (HF's get_image_features().pooler_output)
  at::Tensor image_features(const at::Tensor& pixel_values, bool interpolate);

 private:
  // The language model's inputs: `inputs` with inputs_embeds, the image features in place of
  // the image tokens, where pixel_values are given.
  ForwardInputs language_inputs(const ForwardInputs& inputs);

  Blip2Config config_;
  std::shared_ptr<Blip2VisionModel> vision_model_;
  at::Tensor query_tokens_;  // [1, num_query_tokens, qformer hidden]
  std::shared_ptr<Blip2QFormerModel> qformer_;
  std::shared_ptr<layers::Linear> language_projection_;
  std::shared_ptr<layers::Embedding> token_embedding_;  // the language model's embed_tokens
  std::shared_ptr<CausalLM> language_model_;
};

}  // namespace shardformer::blip2

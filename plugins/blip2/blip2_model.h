// BLIP-2 (HF Blip2ForConditionalGeneration): the vision encoder's features read by the Q-Former's
// query tokens, projected to the language model's width and put in place of the prompt's image
// tokens; the language model runs on the result: OPT's causal LM or T5's encoder-decoder (the
// OPT and T5 families' own classes). Generation keeps the images in the KV cache (OPT) or in the
// cross-attention cache (T5): steps after the first read token ids only.
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
  // cache that holds them takes input_ids alone (T5: decoder_input_ids alone). -> logits
  // [batch, seq, vocab] (T5: [batch, tgt, vocab])
  at::Tensor forward(const ForwardInputs& inputs) override;
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels) override;
  ForwardInputs with_labels(const ForwardInputs& inputs, const at::Tensor& labels) const override {
    return language_model_->with_labels(inputs, labels);
  }
  ModelShape shape() const override { return language_model_->shape(); }
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return language_model_->task(); }

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
  std::shared_ptr<layers::Embedding> token_embedding_;  // OPT's embed_tokens or T5's shared
  std::shared_ptr<Model> language_model_;               // a CausalLM (OPT) or a Seq2SeqLM (T5)
};

}  // namespace shardformer::blip2

// BLIP-2's composite forward pass, as HF's Blip2ForConditionalGeneration computes it.
#include "blip2_model.h"

#include "opt_model.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image_tokens.h"
#include "t5_model.h"

#include <ATen/ATen.h>

namespace shardformer::blip2 {

Blip2ForConditionalGeneration::Blip2ForConditionalGeneration(const BuildContext& ctx,
                                                             const Blip2Config& c)
    : config_(c) {
  bind(ctx);
  vision_model_ = register_module(
      "vision_model", std::make_shared<Blip2VisionModel>(ctx.child("vision_model"), c.vision));
  // HF keeps the query tokens and the Q-Former in fp32 in an fp16 model (its
  // _keep_in_fp32_modules; bf16 models compute them in bf16): the image features go in cast to
  // fp32 and come out cast back.
  const BuildContext fp32 = ctx.dtype() == at::kHalf ? ctx.with_dtype(at::kFloat) : ctx;
  query_tokens_ = register_parameter(
      "query_tokens", fp32.load("query_tokens", {1, c.num_query_tokens, c.qformer.hidden_size}));
  qformer_ = register_module("qformer",
                             std::make_shared<Blip2QFormerModel>(fp32.child("qformer"), c.qformer));
  language_projection_ = register_module(
      "language_projection", layers::make_linear(ctx.child("language_projection"),
                                                 c.qformer.hidden_size, c.text_hidden_size));
  // HF's AutoModelForCausalLM (OPTForCausalLM) or AutoModelForSeq2SeqLM
  // (T5ForConditionalGeneration) of text_config, under "language_model".
  const BuildContext lm = ctx.child("language_model");
  if (c.t5) {
    auto t5 = std::make_shared<t5::T5ForConditionalGeneration>(lm, *c.t5);
    token_embedding_ = t5->shared();
    language_model_ = register_module("language_model", t5);
    return;
  }
  const bool tied = c.opt->tie_word_embeddings;
  auto base = std::make_shared<opt::OPTModel>(lm.child("model"), *c.opt, tied);
  token_embedding_ = base->token_embedding();
  language_model_ = register_module(
      "language_model", std::make_shared<CausalLM>(lm, "model", base, token_embedding_, tied,
                                                   c.opt->vocab_size, c.opt->word_embed_proj_dim));
}

at::Tensor Blip2ForConditionalGeneration::image_features(const at::Tensor& pixel_values,
                                                         bool interpolate) {
  const at::Tensor image = vision_model_->forward(pixel_values, interpolate);  // [b, 1 + p, vh]
  const at::Tensor queries =
      query_tokens_.expand({image.size(0), config_.num_query_tokens, query_tokens_.size(2)});
  const at::Tensor query_output =
      qformer_->forward(queries, image.to(query_tokens_.scalar_type()));       // [b, nq, qh]
  return language_projection_->forward(query_output.to(image.scalar_type()));  // [b, nq, hidden]
}

ForwardInputs Blip2ForConditionalGeneration::language_inputs(const ForwardInputs& inputs) {
  // A decoding step: the images are in the KV cache (OPT: it reads the new token ids) or in the
  // cross-attention cache (T5: the encoder does not run again, no input_ids).
  if (!inputs.pixel_values.defined() && inputs.cache != nullptr &&
      (config_.opt || !inputs.input_ids.defined())) {
    return inputs;
  }
  if (!inputs.input_ids.defined() || inputs.input_ids.dim() != 2) {
    throw Error("BLIP-2 reads input_ids [batch, seq] (with the image tokens) and pixel_values");
  }
  if (!inputs.pixel_values.defined()) {
    throw Error(
        "BLIP-2 reads pixel_values [batch, channels, height, width] with input_ids: images "
        "come through the caption job or ForwardInputs::pixel_values");
  }
  const at::Tensor& ids = inputs.input_ids;  // [batch, seq]
  vision::check_image_tokens(ids, inputs.pixel_values.size(0), config_.image_token_index,
                             config_.num_query_tokens, "BLIP-2");
  const at::Tensor features =
      image_features(inputs.pixel_values, inputs.interpolate_pos_encoding);  // [b, nq, hidden]
  ForwardInputs lm = inputs;
  lm.pixel_values = at::Tensor();
  lm.inputs_embeds = vision::splice_image_tokens(token_embedding_->forward(ids), ids,
                                                 config_.image_token_index, features, "BLIP-2");
  return lm;
}

at::Tensor Blip2ForConditionalGeneration::forward(const ForwardInputs& inputs) {
  return language_model_->forward(language_inputs(inputs));
}

at::Tensor Blip2ForConditionalGeneration::loss(const ForwardInputs& inputs,
                                               const at::Tensor& labels) {
  return language_model_->loss(language_inputs(inputs), labels);
}

}  // namespace shardformer::blip2

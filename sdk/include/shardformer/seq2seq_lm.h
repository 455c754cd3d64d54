// HF's ...ForConditionalGeneration shape, written once for encoder-decoder families: the model's
// decoder_output() (what a pipeline stage sends on, or on the last stage the decoder's output),
// the LM head over it with logits gathered over tp, decoder inputs shifted from the labels, and
// the vocab-parallel loss.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/encoder_decoder.h"
#include "shardformer/model.h"

#include <memory>

namespace shardformer {

class Seq2SeqLM : public Model {
 public:
  at::Tensor forward(const ForwardInputs& inputs) override;  // [batch, tgt, vocab]
  std::string output_name() const override { return "logits"; }
  ModelTask task() const override { return ModelTask::kSeq2SeqLM; }
  // decoder_input_ids default to the labels shifted right from decoder_start_token_id, -100 as
  // pad_token_id (HF's labels= argument).
  ForwardInputs with_labels(const ForwardInputs& inputs, const at::Tensor& labels) const override;
  at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels) override;
  // Decoding steps after the first (no encoder input) run the decoder's stages only.
  bool runs_step(const ForwardInputs& inputs, int64_t chunk) const override;
  bool starts_step(const ForwardInputs& inputs, int64_t chunk) const override;

 protected:
  // Binds ctx (Model::bind).
  Seq2SeqLM(const BuildContext& ctx, int64_t decoder_start_token_id, int64_t pad_token_id);
  // This stage's part of a pass: what it sends on, or, where it ends the model, the decoder's
  // output for the head [batch, tgt or inputs.logits_to_keep, hidden].
  virtual at::Tensor decoder_output(const ForwardInputs& inputs) = 0;
  // The LM head (an untied one, or the decoder's token embedding), on the last stage.
  void set_head(std::shared_ptr<layers::Embedding> head) { head_ = std::move(head); }
  // Where this stage sits in the two stacks (a member of the model, which outlives this call).
  void set_stage(const layers::EncoderDecoderStage& stage) { stage_ = &stage; }

 private:
  int64_t decoder_start_token_id_, pad_token_id_;
  bool parallel_output_;
  std::shared_ptr<layers::Embedding> head_;
  const layers::EncoderDecoderStage* stage_ = nullptr;
};

}  // namespace shardformer

// An encoder-decoder model's LM head, labels and loss.
#include "shardformer/seq2seq_lm.h"

#include "shardformer/error.h"
#include "shardformer/losses.h"

namespace shardformer {

Seq2SeqLM::Seq2SeqLM(const BuildContext& ctx, int64_t decoder_start_token_id, int64_t pad_token_id)
    : decoder_start_token_id_(decoder_start_token_id),
      pad_token_id_(pad_token_id),
      parallel_output_(ctx.tensor_parallel() && ctx.parallel()->config.parallel_output) {
  bind(ctx);
}

at::Tensor Seq2SeqLM::forward(const ForwardInputs& inputs) {
  const at::Tensor hidden = decoder_output(inputs);
  if (!ends_model(inputs.chunk)) return hidden;
  const auto gather = inputs.logits_on_first_tp_rank ? layers::LogitsGather::kFirstRank
                                                     : layers::LogitsGather::kAll;
  return head_->lm_logits(hidden, gather).logits;  // [batch, tgt, vocab]
}

ForwardInputs Seq2SeqLM::with_labels(const ForwardInputs& inputs, const at::Tensor& labels) const {
  ForwardInputs batch = inputs;
  if (batch.decoder_input_ids.defined() || !labels.defined()) return batch;
  batch.decoder_input_ids = shift_right(labels, decoder_start_token_id_, pad_token_id_);
  return batch;
}

at::Tensor Seq2SeqLM::loss(const ForwardInputs& inputs, const at::Tensor& labels) {
  if (!ends_model(inputs.chunk)) throw Error("loss runs on the last pipeline piece");
  const ForwardInputs batch = with_labels(inputs, labels);
  if (!parallel_output_) return Model::loss(batch, labels);
  return cross_entropy_loss(head_->lm_logits(decoder_output(batch), layers::LogitsGather::kNone),
                            labels);
}

bool Seq2SeqLM::runs_step(const ForwardInputs& inputs, int64_t chunk) const {
  return stage_ != nullptr ? stage_->runs_step(inputs) : Model::runs_step(inputs, chunk);
}

bool Seq2SeqLM::starts_step(const ForwardInputs& inputs, int64_t chunk) const {
  return stage_ != nullptr ? stage_->starts_step(inputs) : Model::starts_step(inputs, chunk);
}

}  // namespace shardformer

// Executes a stage's schedule: blocking receives, posted sends, one autograd graph per live
// micro-batch and chunk.
#include "shardformer/pipeline/pipeline_runner.h"

#include "shardformer/runtime/inference_scope.h"

#include "shardformer/error.h"
#include "shardformer/losses.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <chrono>

namespace shardformer::pipeline {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

at::Tensor split_part(const at::Tensor& t, int64_t index, int64_t parts) {
  return t.defined() ? at::tensor_split(t, parts, 0)[index] : at::Tensor();
}

// The model's stage; throws ConfigError when it was built as a whole model.
const PipelineStageManager& stage_of(const Model& model) {
  if (model.pipeline() == nullptr) {
    throw ConfigError("pipeline: the model was built without a pipeline stage");
  }
  return *model.pipeline();
}

}  // namespace

PipelineRunner::PipelineRunner(Model& model, const distributed::ProcessGroup& pp,
                               PipelineOptions options)
    : model_(&model),
      pp_(&pp),
      stages_(&stage_of(model)),
      options_(options),
      channel_(pp, *stages_),
      device_(model.parameters().empty() ? c10::Device(c10::kCPU)
                                         : model.parameters().front().device()) {
  check_schedule(options.schedule,
                 {stages_->num_stages(), options.num_microbatches, stages_->num_chunks()});
}

std::vector<PipelineRunner::MicroBatch> PipelineRunner::split(const ForwardInputs& batch,
                                                              const at::Tensor& labels) const {
  const int64_t m = options_.num_microbatches;
  if ((!batch.input_ids.defined() || batch.input_ids.dim() != 2) &&
      (!batch.input_features.defined() || batch.input_features.dim() != 3) &&
      (!batch.pixel_values.defined() || batch.pixel_values.dim() != 4)) {
    throw Error(
        "pipeline: input_ids must be [batch, seq] (or input_features [batch, mels, frames], or "
        "pixel_values [batch, channels, height, width])");
  }
  if (batch.rows() < m) {
    throw ConfigError(str("pipeline: a batch of ", batch.rows(), " sequences cannot be split into ",
                          m, " micro-batches"));
  }
  if (batch.cache != nullptr || batch.hidden_states.defined()) {
    throw Error("pipeline: a scheduled batch takes no KV cache and no hidden states");
  }
  const int64_t rows = batch.rows();
  const auto check_rows = [&](const at::Tensor& t, const char* what) {
    if (t.defined() && (t.dim() < 1 || t.size(0) != rows)) {
      throw Error(str("pipeline: ", what, " has shape ", shape_str(t.sizes().vec()),
                      " but input_ids has ", rows, " rows (each tensor is split by rows)"));
    }
  };
  check_rows(batch.input_ids, "input_ids");
  check_rows(batch.input_features, "input_features");
  check_rows(batch.pixel_values, "pixel_values");
  check_rows(batch.attention_mask, "attention_mask");
  check_rows(batch.position_ids, "position_ids");
  check_rows(batch.token_type_ids, "token_type_ids");
  check_rows(batch.decoder_input_ids, "decoder_input_ids");
  check_rows(batch.decoder_attention_mask, "decoder_attention_mask");
  check_rows(labels, "labels");
  std::vector<MicroBatch> result(m);
  for (int64_t i = 0; i < m; ++i) {  // parts of [rows / m (+1), seq]
    result[i].inputs.input_ids = split_part(batch.input_ids, i, m);
    result[i].inputs.input_features = split_part(batch.input_features, i, m);
    result[i].inputs.pixel_values = split_part(batch.pixel_values, i, m);
    result[i].inputs.interpolate_pos_encoding = batch.interpolate_pos_encoding;
    result[i].inputs.attention_mask = split_part(batch.attention_mask, i, m);
    result[i].inputs.position_ids = split_part(batch.position_ids, i, m);
    result[i].inputs.token_type_ids = split_part(batch.token_type_ids, i, m);
    result[i].inputs.decoder_input_ids = split_part(batch.decoder_input_ids, i, m);
    result[i].inputs.decoder_attention_mask = split_part(batch.decoder_attention_mask, i, m);
    result[i].labels = split_part(labels, i, m);
  }
  if (labels.defined()) {
    const int64_t total = counted_labels(model_->task(), labels);
    if (total == 0) throw Error("pipeline: every label is ignored; the loss is undefined");
    for (auto& mb : result) {
      mb.loss_weight = static_cast<double>(counted_labels(model_->task(), mb.labels)) /
                       static_cast<double>(total);
    }
  }
  return result;
}

void PipelineRunner::run_forward(const MicroBatch& mb, int64_t index, int64_t chunk, Mode mode) {
  const bool train = mode == Mode::kTrain;
  ForwardInputs inputs = mb.inputs;
  inputs.chunk = chunk;
  Live live;
  if (!model_->starts_model(chunk)) {
    live.input = channel_.recv(Direction::kForward, chunk, mb.input_shape(), index, device_);
    if (train) live.input.requires_grad_(true);
    inputs.hidden_states = live.input;  // [batch, seq, hidden]
  }
  const auto start = Clock::now();
  if (model_->ends_model(chunk)) {
    if (mode == Mode::kForward) {
      outputs_[index] = model_->forward(inputs);
    } else if (mb.loss_weight > 0) {
      const at::Tensor weighted = model_->loss(inputs, mb.labels) * mb.loss_weight;
      loss_ = loss_.defined() ? loss_ + weighted.detach() : weighted.detach();
      live.output = train && loss_scale_ != 1.0 ? weighted * loss_scale_ : weighted;
    } else if (train) {  // no counted token: nothing to learn, but the backward pass still runs
      live.output = model_->forward(inputs).sum() * 0.0;
    }
  } else {
    live.output = model_->forward(inputs);  // [batch, seq, hidden]
    channel_.send(live.output, Direction::kForward, chunk, mb.input_shape(), index);
  }
  stats_.busy_seconds += seconds(Clock::now() - start);
  stats_.forwards += 1;
  if (train) {
    live_[{index, chunk}] = std::move(live);
    stats_.max_live_microbatches =
        std::max<int64_t>(stats_.max_live_microbatches, static_cast<int64_t>(live_.size()));
  }
}

void PipelineRunner::run_backward(const MicroBatch& mb, int64_t index, int64_t chunk) {
  const auto found = live_.find({index, chunk});
  if (found == live_.end()) {
    throw Error(
        str("pipeline: backward of micro-batch ", index, " chunk ", chunk, " before its forward"));
  }
  Live live = std::move(found->second);
  live_.erase(found);
  at::Tensor grad;
  if (!model_->ends_model(chunk)) {
    grad = channel_.recv(Direction::kBackward, chunk, mb.input_shape(), index, device_);
  }
  const auto start = Clock::now();
  if (grad.defined()) {
    torch::autograd::backward({live.output}, {grad});
  } else {
    torch::autograd::backward({live.output});
  }
  stats_.busy_seconds += seconds(Clock::now() - start);
  stats_.backwards += 1;
  if (!model_->starts_model(chunk)) {
    at::Tensor input_grad = live.input.grad();  // [batch, seq, hidden]
    if (!input_grad.defined()) input_grad = at::zeros_like(live.input);
    channel_.send(input_grad, Direction::kBackward, chunk, mb.input_shape(), index);
  }
}

void PipelineRunner::run(const std::vector<MicroBatch>& microbatches, Mode mode) {
  stats_ = StageStats{};
  const auto start = Clock::now();
  const ScheduleShape shape{stages_->num_stages(), options_.num_microbatches,
                            stages_->num_chunks()};
  for (const PipelineAction& action :
       schedule_actions(options_.schedule, shape, stages_->stage(), mode != Mode::kTrain)) {
    const MicroBatch& mb = microbatches.at(action.microbatch);
    if (action.kind == PipelineAction::Kind::kForward) {
      run_forward(mb, action.microbatch, action.chunk, mode);
    } else {
      run_backward(mb, action.microbatch, action.chunk);
    }
  }
  channel_.wait_sends();
  stats_.total_seconds = seconds(Clock::now() - start);
}

void PipelineRunner::check_labels(const ForwardInputs& batch, const at::Tensor& labels) const {
  if (model_->task() == ModelTask::kBase) {
    throw Error("pipeline: a base model (" + model_->output_name() + ") has no loss");
  }
  const bool per_sequence = model_->task() == ModelTask::kSequenceClassification;
  const bool seq2seq = model_->task() == ModelTask::kSeq2SeqLM;
  const auto expected = per_sequence ? std::vector<int64_t>{batch.rows()}
                        : seq2seq && labels.defined() && labels.dim() == 2
                            ? std::vector<int64_t>{batch.rows(), labels.size(1)}
                            : batch.input_ids.sizes().vec();
  if (!labels.defined() || labels.sizes().vec() != expected) {
    throw Error(str("pipeline: labels must be ", shape_str(expected),
                    per_sequence ? " (one per sequence)"
                    : seq2seq    ? " (one row per sequence, shaped like the decoder's inputs)"
                                 : " (shaped like input_ids)"));
  }
}

at::Tensor PipelineRunner::train_step(const ForwardInputs& batch, const at::Tensor& labels,
                                      double loss_scale) {
  check_labels(batch, labels);
  loss_scale_ = loss_scale;
  const std::vector<MicroBatch> microbatches = split(model_->with_labels(batch, labels), labels);
  check_usable();
  find_shared_parameters();
  // Gradients already accumulated (identical on every holder): only this step's part of a
  // shared parameter's gradient is exchanged.
  std::vector<at::Tensor> before;
  for (const SharedParameter& s : *shared_) {
    before.push_back(s.param.grad().defined() ? s.param.grad().clone() : at::Tensor());
  }
  loss_ = at::Tensor();
  try {
    run(microbatches, Mode::kTrain);
    sum_shared_gradients(before);
  } catch (...) {
    live_.clear();
    failed_ = true;
    throw;
  }
  return stages_->is_last_stage() ? loss_ : at::Tensor();
}

at::Tensor PipelineRunner::forward(const ForwardInputs& batch) {
  const std::vector<MicroBatch> microbatches = split(batch, at::Tensor());
  check_usable();
  const runtime::InferenceScope inference;
  outputs_.assign(microbatches.size(), at::Tensor());
  try {
    run(microbatches, Mode::kForward);
  } catch (...) {
    failed_ = true;
    throw;
  }
  if (!stages_->is_last_stage()) return at::Tensor();
  at::Tensor output = at::cat(outputs_, 0);  // [batch, seq, ...]
  outputs_.clear();
  return output;
}

at::Tensor PipelineRunner::loss(const ForwardInputs& batch, const at::Tensor& labels) {
  check_labels(batch, labels);
  const std::vector<MicroBatch> microbatches = split(model_->with_labels(batch, labels), labels);
  check_usable();
  const runtime::InferenceScope inference;
  loss_ = at::Tensor();
  try {
    run(microbatches, Mode::kLoss);
  } catch (...) {
    failed_ = true;
    throw;
  }
  return stages_->is_last_stage() ? loss_ : at::Tensor();
}

void PipelineRunner::check_usable() const {
  if (failed_) {
    throw Error(
        "pipeline: a previous step of this runner failed; its peers' messages are out of step "
        "with it, so it cannot run again (the job should end)");
  }
}

void PipelineRunner::find_shared_parameters() {
  if (shared_) return;
  shared_.emplace();
  const auto& patterns = model_->shared_patterns();
  if (patterns.empty() || stages_->num_stages() == 1) return;
  const auto n = static_cast<int64_t>(patterns.size());
  at::Tensor holds = at::zeros({1, n}, at::kLong);  // [1, patterns]: 1 where held here
  for (int64_t i = 0; i < n; ++i) holds[0][i] = model_->shared_parameters(i).empty() ? 0 : 1;
  const at::Tensor all = pp_->all_gather(holds, 0);  // [stages, patterns]
  auto params = model_->named_parameters();
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<std::string> names = model_->shared_parameters(i);
    if (names.size() > 1) {
      throw ModelError(str("pipeline: shared parameter pattern '", patterns[i], "' matches ",
                           names.size(), " parameters (", join(names, ", "),
                           "); it must name one"));
    }
    std::vector<int64_t> holders;
    for (int64_t s = 0; s < all.size(0); ++s) {
      if (all[s][i].item<int64_t>() != 0) holders.push_back(s);
    }
    if (names.empty() || holders.size() < 2) continue;
    shared_->push_back({params[names.front()], holders, kFirstFreeTag + static_cast<int>(i)});
  }
}

void PipelineRunner::sum_shared_gradients(const std::vector<at::Tensor>& before) {
  for (size_t k = 0; k < shared_->size(); ++k) {
    const SharedParameter& s = (*shared_)[k];
    at::Tensor param = s.param;
    if (!param.grad().defined()) param.mutable_grad() = at::zeros_like(param);
    at::Tensor grad = param.mutable_grad();  // shaped like the parameter
    at::Tensor step = before[k].defined() ? grad - before[k] : grad.clone();  // this step's part
    const auto root = static_cast<int>(s.holders.front());
    if (pp_->rank() == root) {  // sum the holders' parts here, then send the sum back
      for (size_t h = 1; h < s.holders.size(); ++h) {
        at::Tensor other = at::empty_like(step);
        pp_->recv_(other, static_cast<int>(s.holders[h]), s.tag);
        step.add_(other);
      }
      for (size_t h = 1; h < s.holders.size(); ++h) {
        pp_->send(step, static_cast<int>(s.holders[h]), s.tag);
      }
    } else {
      pp_->send(step, root, s.tag);
      pp_->recv_(step, root, s.tag);
    }
    grad.copy_(before[k].defined() ? before[k] + step : step);
  }
}

}  // namespace shardformer::pipeline

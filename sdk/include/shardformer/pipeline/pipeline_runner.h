// PipelineRunner: runs one pipeline stage's model through a schedule. It splits the batch into
// micro-batches, moves activations and gradients between stages, weights each micro-batch's
// loss so the step equals the whole batch's mean loss, and sums the gradients of parameters
// that several stages hold (GPT-2's tied wte / lm_head).
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/model.h"
#include "shardformer/pipeline/schedule.h"
#include "shardformer/pipeline/stage_channel.h"

#include <ATen/Tensor.h>

#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace shardformer::pipeline {

struct PipelineOptions {
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t num_microbatches = 1;  // the batch is split into this many (sizes differ by <= 1)
};

// What the last step did on this stage: time computing vs. the step's wall time (the rest is
// the bubble and communication), and the most micro-batches whose activations were alive.
struct StageStats {
  double busy_seconds = 0, total_seconds = 0;
  int64_t forwards = 0, backwards = 0, max_live_microbatches = 0;
  double idle_fraction() const {
    return total_seconds > 0 ? 1.0 - busy_seconds / total_seconds : 0.0;
  }
};

class PipelineRunner {
 public:
  // `model` is this rank's stage (model.pipeline() set) and `pp` the pipeline group of this
  // rank's tensor-parallel position; both must outlive the runner. Throws ConfigError when the
  // schedule does not fit the model's stages and chunks.
  PipelineRunner(Model& model, const distributed::ProcessGroup& pp, PipelineOptions options);

  // Forward and backward of every micro-batch of `batch` (input_ids [batch, seq] and the
  // optional attention_mask / position_ids, [batch, seq] each) with causal-LM labels
  // [batch, seq]. Gradients accumulate into the parameters; this step's gradients of shared
  // parameters are summed over the stages holding them. Returns the batch's mean loss on the
  // last stage, undefined elsewhere. After a step throws, the runner refuses further steps.
  // loss_scale multiplies what is backpropagated (not the returned loss): a data-parallel
  // rank's share of the global batch, a mixed-precision loss scale.
  at::Tensor train_step(const ForwardInputs& batch, const at::Tensor& labels,
                        double loss_scale = 1.0);
  // Inference: the model's output for the whole batch [batch, seq, ...] on the last stage,
  // undefined elsewhere.
  at::Tensor forward(const ForwardInputs& batch);
  // Evaluation: the batch's mean causal-LM loss without gradients, on the last stage (each
  // micro-batch weighted like train_step), undefined elsewhere.
  at::Tensor loss(const ForwardInputs& batch, const at::Tensor& labels);

  const StageStats& stats() const { return stats_; }
  const PipelineOptions& options() const { return options_; }
  const StageChannel& channel() const { return channel_; }

 private:
  struct MicroBatch {
    ForwardInputs inputs;
    at::Tensor labels;
    double loss_weight = 0;  // valid tokens of this micro-batch / of the batch
    std::vector<int64_t> input_shape() const { return step_shape(inputs); }
  };
  struct SharedParameter {
    at::Tensor param;              // this stage's copy
    std::vector<int64_t> holders;  // stages holding a copy, in order
    int tag;
  };
  struct Live {
    at::Tensor input;   // the received activation (a leaf needing grad), undefined on chunk 0
    at::Tensor output;  // the loss on the last piece, else the activation sent on
  };

  enum class Mode { kTrain, kForward, kLoss };
  std::vector<MicroBatch> split(const ForwardInputs& batch, const at::Tensor& labels) const;
  void check_labels(const ForwardInputs& batch, const at::Tensor& labels) const;
  void run(const std::vector<MicroBatch>& microbatches, Mode mode);
  void run_forward(const MicroBatch& mb, int64_t index, int64_t chunk, Mode mode);
  void run_backward(const MicroBatch& mb, int64_t index, int64_t chunk);
  void check_usable() const;
  // Finds, once, the policy's shared parameters held here and by which stages (collective).
  void find_shared_parameters();
  // Adds to each shared gradient what the other holders added this step (grad - before).
  void sum_shared_gradients(const std::vector<at::Tensor>& before);

  Model* model_;
  const distributed::ProcessGroup* pp_;
  const PipelineStageManager* stages_;
  PipelineOptions options_;
  StageChannel channel_;
  c10::Device device_;
  std::map<std::pair<int64_t, int64_t>, Live> live_;  // by (micro-batch, chunk)
  std::vector<at::Tensor> outputs_;                   // forward(): the last piece's, per mb
  at::Tensor loss_;
  double loss_scale_ = 1.0;
  StageStats stats_;
  std::optional<std::vector<SharedParameter>> shared_;  // held here and elsewhere
  bool failed_ = false;
};

}  // namespace shardformer::pipeline

// Trainer: optimizer steps over a Session's model at any dp x pp x tp layout. Each step takes
// the next global batch of the sample stream, gives each data-parallel rank its share, runs
// forward and backward (micro-batched, pipelined when the session is), sums the gradients over
// the ranks sharing them, clips by the global norm and updates with AdamW (ZeRO-1: each dp rank
// updates its share of the parameters and broadcasts them). Saves HF checkpoints with the
// training state beside them, atomically, and resumes from them at any layout.
#pragma once

#include "shardformer/runtime/session.h"
#include "shardformer/training/data.h"
#include "shardformer/training/gradients.h"
#include "shardformer/training/mixed_precision.h"
#include "shardformer/training/optimizer.h"
#include "shardformer/training/overlapped_reducer.h"

#include <filesystem>
#include <memory>
#include <set>
#include <vector>

namespace shardformer::training {

struct TrainOptions {
  int64_t steps = 100;
  int64_t global_batch_size = 8;  // samples per optimizer step, over every dp rank
  int64_t micro_batch_size = 0;   // samples per forward / backward; 0: a rank's whole share
  AdamWOptions adam;
  LRSchedule schedule;         // total_steps: the run's steps
  double max_grad_norm = 1.0;  // <= 0: no clipping (the norm is still reported)
  int zero_stage = 0;          // 1: AdamW states sharded over dp
  int64_t eval_batches = 1;    // global batches of held-out samples per evaluation
  // bf16 / fp16: the model computes in it, AdamW updates fp32 masters (the session must load
  // the model in float32); fp16 scales the loss (loss_scale).
  Precision precision = Precision::kFloat32;
  LossScaleOptions loss_scale;
  // Which layers recompute their activations in backward (Model::set_recompute).
  layers::RecomputePolicy recompute;
  // Data-parallel gradients are all-reduced in buckets of about this many bytes; without a
  // pipeline, each while backward is still running (OverlappedReducer).
  int64_t bucket_bytes = 25 << 20;
  // Files every save holds beside the weights, copied as they are (the model folder's tokenizer
  // and processor files, so that a save runs as a model folder does).
  std::vector<std::filesystem::path> save_with;
};

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  double loss = 0, lr = 0, grad_norm = 0, seconds = 0;
  int64_t tokens = 0;     // labelled tokens of the global batch
  bool skipped = false;   // fp16: the gradients overflowed, nothing was updated
  double loss_scale = 1;  // the scale this step's loss was multiplied by
};

class Trainer {
 public:
  // Throws ConfigError when the batch sizes do not divide over the ranks and micro-batches.
  Trainer(Session& session, const TokenDataset& data, TrainOptions options);

  StepMetrics step();
  // Mean loss over eval_batches global batches of held-out samples (collective).
  double evaluate();
  int64_t steps_done() const { return steps_; }
  const AdamW& optimizer() const { return *optimizer_; }
  // The data-parallel reducer overlapping backward; null without dp or with a pipeline.
  const OverlappedReducer* reducer() const { return reducer_.get(); }
  const TrainOptions& options() const { return options_; }

  // The model as an HF checkpoint in `dir` and the training state in dir/training_state
  // (optimizer moments stored like the weights, trainer_state.json with the step and the data
  // position, each rank's dropout streams). Written into a temporary folder and renamed into
  // `dir` once every rank has written and synced: a reader finds a whole checkpoint or none.
  // Collective. Throws Error when `dir` exists.
  void save(const std::filesystem::path& dir) const;
  // Continues from a checkpoint save() wrote: the session must have been built from `dir`.
  // Moments are sliced for this layout, so any dp x pp x tp layout resumes; dropout streams
  // are restored when the layout is the one saved (else their seeds stand).
  void load(const std::filesystem::path& dir);

 private:
  // Loss and labelled-token count of this rank's share, with its backward pass.
  std::pair<double, int64_t> forward_backward(const Batch& share, int64_t global_tokens,
                                              double loss_scale);
  std::set<std::string> owned_names() const;
  // Clipping by `coef` and the AdamW update (of the masters, copied into the model, when
  // mixed), for gradients of a loss multiplied by `loss_scale`.
  void update(double coef, double lr, double loss_scale);
  // The fp32 value of every parameter (masters when mixed, from their owners), for a save.
  std::map<std::string, at::Tensor> full_precision_weights() const;
  void broadcast_updated_parameters();

  Session* session_;
  const TokenDataset* data_;
  TrainOptions options_;
  SampleStream stream_;
  std::unique_ptr<GradientNorm> norm_;
  std::unique_ptr<MasterWeights> masters_;  // mixed precision only
  // dp > 1 without a pipeline: the dp all-reduce runs during the last micro-batch's backward
  std::unique_ptr<OverlappedReducer> reducer_;
  LossScaler scaler_;
  std::unique_ptr<AdamW> optimizer_;
  std::map<std::string, int> owner_;  // ZeRO-1: dp rank updating each parameter
  int64_t steps_ = 0;
};

}  // namespace shardformer::training

// BuildContext: what a building block sees while the model is built — its module path, the
// checkpoint it loads its parameters from (converted to the model's dtype/device), and, under
// tensor parallelism, its shard style from the policy and the tensor-parallel group.
#pragma once

#include "shardformer/checkpoint_io/checkpoint_usage.h"
#include "shardformer/parallel/pipeline_stage_manager.h"
#include "shardformer/parallel/policy.h"
#include "shardformer/parallel/tensor_shard.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace shardformer {

class Checkpoint;
class HFConfig;

class BuildContext {
 public:
  // base_model_prefix is HF's (e.g. "transformer" for GPT-2): checkpoints of the base model
  // store names without it and those of head models with it; both load into either model.
  // parallel: null for one rank.
  BuildContext(const Checkpoint& checkpoint, c10::ScalarType dtype, c10::Device device,
               std::string base_model_prefix = "", const ParallelContext* parallel = nullptr);

  // The context of a child module: ctx.child("h").child(0) has path "h.0".
  BuildContext child(std::string_view name) const;
  BuildContext child(int64_t index) const;
  // The same context loading its parameters in `dtype` (a module HF keeps in fp32 in a bf16
  // model, e.g. BLIP-2's Q-Former: its _keep_in_fp32_modules).
  BuildContext with_dtype(c10::ScalarType dtype) const;

  // Dotted module path, "" at the root.
  const std::string& path() const { return path_; }
  // path + "." + leaf (or leaf at the root).
  std::string name_of(std::string_view leaf) const;

  // Reads parameter `leaf` of this module, whose HF shape is `shape`. With a split `shard`
  // (dim, fused blocks, padding) under tensor parallelism only this rank's slice is read; the
  // shard is recorded in plan(). Throws CheckpointError naming the checkpoint, the parameter
  // and both shapes when the checkpoint's shape differs.
  at::Tensor load(std::string_view leaf, const std::vector<int64_t>& shape,
                  TensorShard shard = {}) const;
  // Declares checkpoint tensor `leaf` of this module known and deliberately unused (HF
  // buffers such as GPT-2's attn.bias, a tied head's copy of the embedding). `why` is logged.
  // Nothing happens when the checkpoint does not hold it.
  void skip(std::string_view leaf, std::string_view why) const;
  // The same for every checkpoint tensor under module `child` of this one (another task's head,
  // e.g. BERT's "cls" when building BertModel).
  void skip_module(std::string_view child, std::string_view why) const;
  // What the model built from this context (and its children) loaded and skipped so far.
  const std::shared_ptr<CheckpointUsage>& usage() const { return usage_; }

  // This module's shard style: the policy's rule for path(), replicate without parallelism.
  ShardStyle style() const;
  const ParallelContext* parallel() const { return parallel_; }
  bool tensor_parallel() const { return parallel_ != nullptr && parallel_->tensor_parallel(); }
  int tp_size() const { return tensor_parallel() ? parallel_->tp_size() : 1; }
  int tp_rank() const { return tensor_parallel() ? parallel_->tp_rank() : 0; }
  // n / tp_size(); throws ModelError naming `what` (a config key) when it does not divide.
  int64_t divide_by_tp(int64_t n, std::string_view what) const;
  // Throws ModelError, naming the config file, when the job asked for sequence parallelism:
  // `model` ("T5", "Falcon with ALiBi (alibi = true)") does not run under it, for `why`.
  void refuse_sequence_parallelism(std::string_view model, std::string_view why = {}) const;

  // Pipeline parallelism: the layers of a model of num_layers this stage builds, one range
  // per chunk ({[0, num_layers)} without a pipeline; throws ModelError when the stage manager
  // was made for another layer count), and whether it builds the model's first piece
  // (embeddings) or last (final norm, head).
  std::vector<LayerRange> layer_ranges(int64_t num_layers) const;
  // The same for one stack of a model with several (an encoder-decoder's): its layers are
  // [first, first + count) of the model's num_layers, and the ranges are in the stack's own
  // indices (empty where the chunk holds none of them).
  std::vector<LayerRange> layer_ranges(int64_t num_layers, int64_t first, int64_t count) const;
  bool builds_first_piece() const;
  bool builds_last_piece() const;
  const PipelineStageManager* pipeline() const {
    return parallel_ != nullptr ? parallel_->pipeline : nullptr;
  }

  // Every split parameter loaded so far, by parameter name.
  const std::shared_ptr<ShardingPlan>& plan() const { return plan_; }
  const HFConfig& config() const;
  const Checkpoint& checkpoint() const { return *checkpoint_; }
  c10::ScalarType dtype() const { return dtype_; }
  c10::Device device() const { return device_; }

 private:
  // The checkpoint name holding parameter `name` (which may differ by the base-model prefix).
  std::string resolve(const std::string& name) const;

  const Checkpoint* checkpoint_;
  c10::ScalarType dtype_;
  c10::Device device_;
  std::string base_model_prefix_;
  const ParallelContext* parallel_;
  std::shared_ptr<ShardingPlan> plan_;
  std::shared_ptr<CheckpointUsage> usage_;
  std::string path_;
};

}  // namespace shardformer

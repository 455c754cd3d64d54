// The model interface the host drives: what a plugin's factory returns, its inputs, and the
// arguments it is built from.
#pragma once

#include "shardformer/checkpoint_io/checkpoint_usage.h"
#include "shardformer/kv_cache.h"
#include "shardformer/layers/recompute.h"
#include "shardformer/parallel/pipeline_stage_manager.h"
#include "shardformer/parallel/policy.h"
#include "shardformer/parallel/sequence_split.h"
#include "shardformer/parallel/tensor_shard.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardformer {

class BuildContext;
class Checkpoint;

// What a model is built from. The checkpoint outlives the model's construction only: a model
// copies what it keeps.
struct ModelArgs {
  // A family serving another layout's files may add views to it before building
  // (Checkpoint::add_views).
  Checkpoint* checkpoint = nullptr;
  std::string architecture;  // one of the family's architectures()
  c10::ScalarType dtype = c10::kFloat;
  c10::Device device = c10::kCPU;
  // null: one rank. Needed during construction only; the process groups it points to must
  // outlive the model (layers keep those pointers).
  const ParallelContext* parallel = nullptr;
};

struct ForwardInputs {
  at::Tensor input_ids{};       // [batch, seq] int64
  at::Tensor attention_mask{};  // [batch, past + seq], 1 = attend, 0 = padding; undefined = all 1
  at::Tensor position_ids{};    // [batch, seq] int64; undefined = past + arange(seq)
  at::Tensor token_type_ids{};  // [batch, seq] int64 (BERT's segments); undefined = all 0
  // The token embeddings to use instead of embedding input_ids (HF's inputs_embeds: BLIP-2's
  // image features put in place of its image tokens) [batch, seq, embedding size]; input_ids
  // still give the batch's shape. Read by the families whose docs say so (OPT, T5's encoder);
  // undefined: none.
  at::Tensor inputs_embeds{};
  KVCache* cache = nullptr;    // when given, keys/values are appended and past = cache length
  int64_t logits_to_keep = 0;  // a causal LM's logits for the last N positions only (0: all)
  // Tensor parallelism: only tp rank 0 needs a language model's logits (a job writing them out
  // from there); the other tp ranks may return an undefined tensor, which spares them receiving
  // the whole vocabulary.
  bool logits_on_first_tp_rank = false;
  // Pipeline parallelism: every stage gets input_ids and attention_mask (for the batch's shape
  // and mask); a piece that does not start the model also gets the previous piece's output.
  at::Tensor hidden_states{};  // [batch, seq, hidden]
  int64_t chunk = 0;           // which of this stage's model chunks runs (interleaved schedule)
  // Encoder-decoder models (ModelTask::kSeq2SeqLM): input_ids and attention_mask are the
  // encoder's (source), these the decoder's (target). Generation's steps after the first leave
  // input_ids undefined: the encoder ran once, its keys and values are in cross_cache.
  at::Tensor decoder_input_ids{};  // [batch, tgt] int64
  // An audio encoder's input instead of input_ids: log-mel features [batch, mels, frames]
  // (Whisper's, as HF's WhisperFeatureExtractor makes them).
  at::Tensor input_features{};
  // An image encoder's input instead of input_ids: [batch, channels, height, width] (HF's
  // pixel_values, as vision::pixel_values makes them).
  at::Tensor pixel_values{};
  // Vision: position embeddings interpolated for images of another size than the config's
  // (HF's interpolate_pos_encoding); false refuses such images.
  bool interpolate_pos_encoding = false;
  // SAM's prompts, as HF's SamModel takes them (SamProcessor's coordinates: pixels of the image
  // resized for the model): points [batch, point_batch, points, 2] (x, y) with labels [batch,
  // point_batch, points] (1: on the object, 0: off it, -1: not a point, -10: padding;
  // undefined: all 1), boxes [batch, boxes, 4] (x1, y1, x2, y2); undefined when absent.
  at::Tensor input_points{}, input_labels{}, input_boxes{};
  // SAM's mask prompts: [batch, 1, 4 grid, 4 grid] logits of a mask (a previous pred_masks).
  at::Tensor input_masks{};
  bool multimask_output = true;         // SAM: three masks per prompt; false: the single one
  at::Tensor decoder_attention_mask{};  // [batch, past + tgt], 1 = attend; undefined = all 1
  // The cross-attention keys and values of every decoder layer, projected from the encoder's
  // output at the first step and read at every later one.
  KVCache* cross_cache = nullptr;

  // The batch's number of sequences: the rows of the first tensor given of input_ids,
  // input_features, pixel_values, decoder_input_ids; 0 when none is.
  int64_t rows() const;
};

// Hyper-parameters the host needs to drive any model (generation, cache sizing, reporting).
struct ModelShape {
  int64_t num_layers = 0;
  int64_t num_heads = 0;  // key/value heads held by this rank
  int64_t head_dim = 0;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t max_positions = 0;
};

// What a model's head computes, which decides its loss and whether it generates.
enum class ModelTask {
  kBase,                    // hidden states; no loss
  kCausalLM,                // logits [batch, seq, vocab]; shifted next-token loss; generates
  kMaskedLM,                // logits [batch, seq, vocab]; loss on the labelled positions
  kSequenceClassification,  // logits [batch, num_labels]; labels [batch]
  // An encoder-decoder LM: logits [batch, tgt, vocab] of the decoder's inputs; labels [batch,
  // tgt] unshifted (the decoder's inputs are the labels shifted right); generates.
  kSeq2SeqLM,
};

// A built model. forward() returns the model's main output: logits for a head, the last hidden
// state [batch, seq, hidden] for a base model. Under pipeline parallelism a model is one stage:
// forward(inputs) runs chunk inputs.chunk and returns the model's output only when that chunk
// ends the model, else hidden states [batch, seq, hidden] for the next stage.
class Model : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const ForwardInputs& inputs) = 0;
  virtual ModelShape shape() const = 0;
  // "logits" or "last_hidden_state": the name of forward()'s output in HF terms.
  virtual std::string output_name() const = 0;
  virtual ModelTask task() const { return ModelTask::kBase; }
  bool has_lm_head() const {
    return task() == ModelTask::kCausalLM || task() == ModelTask::kSeq2SeqLM;
  }
  bool is_encoder_decoder() const { return task() == ModelTask::kSeq2SeqLM; }
  // The inputs a loss over `labels` runs on: an encoder-decoder model fills its decoder inputs
  // from the labels (shifted right) where they are not given; others return `inputs`.
  virtual ForwardInputs with_labels(const ForwardInputs& inputs, const at::Tensor& labels) const;
  // Under a pipeline, for a pass that not every piece takes part in (an encoder-decoder's
  // decoding steps after the first skip the encoder): whether chunk `chunk` runs `inputs`, and
  // whether it starts the pass (reads ids, receives nothing). By default every chunk runs and
  // the model's first piece starts.
  virtual bool runs_step(const ForwardInputs& /*inputs*/, int64_t /*chunk*/) const { return true; }
  virtual bool starts_step(const ForwardInputs& /*inputs*/, int64_t chunk) const {
    return starts_model(chunk);
  }
  // Every output by its HF name (BertModel adds "pooler_output"); forward()'s by default.
  virtual std::map<std::string, at::Tensor> forward_all(const ForwardInputs& inputs);

  // The mean loss of the task's labels, as HF's labels= argument computes it (kIgnoreIndex =
  // -100 skipped): causal LM and masked LM labels [batch, seq], classification labels [batch].
  // The default uses forward(); a model may override it to use vocab-parallel cross-entropy on
  // its local logits. Throws Error for a base model.
  virtual at::Tensor loss(const ForwardInputs& inputs, const at::Tensor& labels);

  // The parameters split across tensor-parallel ranks, by name; the others are replicated.
  const ShardingPlan& sharding() const { return *sharding_; }
  // The checkpoint tensors this rank's model loaded and knowingly skipped.
  const CheckpointUsage& checkpoint_usage() const { return *usage_; }

  // The pipeline stage this model is; null when it is the whole model.
  const PipelineStageManager* pipeline() const { return pipeline_ ? &*pipeline_ : nullptr; }
  // Whether chunk `chunk` of this stage starts the model (takes input_ids) / ends it.
  bool starts_model(int64_t chunk = 0) const {
    return !pipeline_ || pipeline_->holds_first_piece(chunk);
  }
  bool ends_model(int64_t chunk = 0) const {
    return !pipeline_ || pipeline_->holds_last_piece(chunk);
  }
  // The policy's shared-parameter patterns, and this stage's parameters matching pattern i
  // (e.g. GPT-2's tied wte, held by the first and the last stage).
  const std::vector<std::string>& shared_patterns() const { return shared_patterns_; }
  std::vector<std::string> shared_parameters(size_t pattern) const;
  // How the sequence is split across ranks (inactive: it is not).
  const SequenceParallelism& sequence_parallelism() const { return sequence_; }

  // Activation checkpointing: which layers of every LayerStack recompute in backward (training
  // mode only). Throws ConfigError when the policy does not fit this stage, or when it asks for
  // recomputation and the model holds no LayerStack.
  void set_recompute(const layers::RecomputePolicy& policy);

 protected:
  // Records what the model was built with: the sharding plan, the pipeline stage and the
  // policy's shared parameters. Every model calls it in its constructor.
  void bind(const BuildContext& ctx);
  // The same for a model built without a BuildContext (no checkpoint: benchmarks, tests).
  void bind(std::shared_ptr<ShardingPlan> plan, const ParallelContext* parallel);

 private:
  std::shared_ptr<ShardingPlan> sharding_ = std::make_shared<ShardingPlan>();
  std::shared_ptr<CheckpointUsage> usage_ = std::make_shared<CheckpointUsage>();
  std::optional<PipelineStageManager> pipeline_;
  std::vector<std::string> shared_patterns_;
  SequenceParallelism sequence_;
};

// Every parameter of `model` as the full HF tensor (gathered over `group` when split); with
// grads = true, their gradients instead. Collective: every tensor-parallel rank must call it.
std::map<std::string, at::Tensor> gather_parameters(const Model& model,
                                                    const distributed::ProcessGroup* group,
                                                    bool grads);

}  // namespace shardformer

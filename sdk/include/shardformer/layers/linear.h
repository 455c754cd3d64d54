// Linear building blocks in HF's two weight layouts (nn.Linear [out, in] and GPT-2's Conv1D
// [in, out]) and their tensor-parallel forms, Linear1D_Col and Linear1D_Row. make_linear()
// builds whichever the policy asks for at the module's path. Parameter names are HF's.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/parallel/sequence_split.h"

#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace shardformer::layers {

enum class WeightLayout {
  kLinear,  // weight [out, in], y = x W^T + b (torch.nn.Linear)
  kConv1D,  // weight [in, out], y = x W + b (transformers.pytorch_utils.Conv1D)
};

struct LinearOptions {
  bool bias = true;
  WeightLayout layout = WeightLayout::kLinear;
  // Column split: the output is this many units (attention heads; 0: features). With fewer
  // units than tp ranks each unit is held by tp / units consecutive ranks (GQA's KV heads,
  // as Megatron and vLLM replicate them), whose gradients of it are summed.
  int64_t column_units = 0;
  // An uneven split, per tp rank: the output features (column) or input features (row) it
  // holds, summing to the layer's (attention heads that tp does not divide). Empty: equal.
  std::vector<int64_t> split_sizes{};
};

class Dropout;

// A layer's weight and bias on this rank, in its layout.
struct LocalWeights {
  at::Tensor weight, bias;  // bias undefined without one
  bool k_major = false;     // weight [in, out] (Conv1D); [out, in] otherwise
};

class Linear : public torch::nn::Module {
 public:
  // [..., in] -> [..., out] (or the local part of either, as the subclass says)
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // This rank's weights when forward(x) is x W (+ b) here alone, no communication and nothing
  // gathered (a replicated layer, a column-parallel one that keeps its part): what fused
  // decoding kernels read in place of forward(). Empty otherwise.
  virtual std::optional<LocalWeights> local_weights() const { return std::nullopt; }
  // residual + forward(input) and, given `norm`, its norm (ResidualNorm::add_forward). A
  // row-parallel layer in inference computes both in the pass that sums its ranks' products
  // (kernels::sum_add_norm), bit for bit the separate ops.
  virtual ResidualSum forward_residual(const at::Tensor& input, const at::Tensor& residual,
                                       const ResidualNorm* norm);
};

// The end of a sublayer: residual + dropout(linear(input)) and, given `norm`, the norm of it (the
// next sublayer's, pre-LN; this one's output, post-LN). Without a dropout, or with it inactive,
// the layer computes them together (Linear::forward_residual); sequence: the forward pass's
// split, for the dropout (null: none).
ResidualSum add_to_residual(Linear& linear, const at::Tensor& input, Dropout* dropout,
                            const at::Tensor& residual, const ResidualNorm* norm,
                            const SequenceSplit* sequence = nullptr);

// The whole layer on every rank.
class ReplicatedLinear : public Linear {
 public:
  ReplicatedLinear(const BuildContext& ctx, int64_t in_features, int64_t out_features,
                   LinearOptions options);
  at::Tensor forward(const at::Tensor& input) override;
  std::optional<LocalWeights> local_weights() const override;

 protected:
  // Allocates from the checkpoint with the given split of weight and bias.
  ReplicatedLinear(const BuildContext& ctx, int64_t in_features, int64_t out_features,
                   LinearOptions options, TensorShard weight_shard, TensorShard bias_shard);
  at::Tensor matmul(const at::Tensor& input) const;  // x W (no bias)

  int64_t local_in_, local_out_;
  LinearOptions options_;
  at::Tensor weight_, bias_;
};

// Column parallel: output features split across the tensor-parallel group. Input replicated
// [..., in] -> output [..., out/tp] (or [..., out] with gather_output). Backward all-reduces
// the input gradient. Under split_gather sequence parallelism the input is this rank's part of
// the sequence [batch, seq/tp, in], all-gathered first (its gradient reduce-scattered), with the
// GEMM overlapping the communication when enable_sequence_overlap is set. In inference on CPU
// ranks that share memory, the GEMM reads the gathered tokens where the collective holds them.
class Linear1D_Col : public ReplicatedLinear {
 public:
  Linear1D_Col(const BuildContext& ctx, int64_t in_features, int64_t out_features,
               LinearOptions options, ShardStyle style);
  at::Tensor forward(const at::Tensor& input) override;
  std::optional<LocalWeights> local_weights() const override;

 private:
  friend std::vector<at::Tensor> forward_shared_input(const std::vector<Linear*>& layers,
                                                      const at::Tensor& x);
  // Whether an inference forward under split_gather multiplies the gathered input where the
  // group's collective holds it (gathered_products).
  bool gathers_into_product(const at::Tensor& x) const;
  // Inference under split_gather: this rank's tokens x [batch, seq/tp, in] gathered and run
  // through each layer's weight and bias, a block of gathered rows at a time where the group's
  // collective holds them: [batch, seq, out/tp] per layer.
  static std::vector<at::Tensor> gathered_products(const std::vector<Linear1D_Col*>& columns,
                                                   const at::Tensor& x);
  const distributed::ProcessGroup* group_;
  bool gather_output_;
  bool sequence_split_, overlap_;
};

// Row parallel: input features split. Input [..., in/tp] (or [..., in], split first when
// input_is_parallel is false) -> output [..., out], all-reduced, bias added once. Under
// split_gather sequence parallelism the output is reduce-scattered along the sequence instead:
// [batch, seq, in/tp] -> [batch, seq/tp, out]. In inference on CPU ranks that share memory the
// product goes straight into the collective's slots (ProcessGroup::sum_produced and
// reduce_scatter_produced), and forward_residual sums the slots, the residual and the next norm
// in one pass (under split_gather, over this rank's tokens only).
class Linear1D_Row : public ReplicatedLinear {
 public:
  Linear1D_Row(const BuildContext& ctx, int64_t in_features, int64_t out_features,
               LinearOptions options, ShardStyle style);
  at::Tensor forward(const at::Tensor& input) override;
  ResidualSum forward_residual(const at::Tensor& input, const at::Tensor& residual,
                               const ResidualNorm* norm) override;
  std::optional<LocalWeights> local_weights() const override { return std::nullopt; }

 private:
  // Writes rows [first, first + n) of rows [tokens, in/tp] times this rank's weight into a
  // collective's block [n, out] (ProcessGroup::sum_produced and its kin).
  std::function<void(int64_t, at::Tensor&)> slot_producer(const at::Tensor& rows) const;
  const distributed::ProcessGroup* group_;
  bool input_is_parallel_;
  bool sequence_split_;
};

// The outputs of layers that read the same input x and are split alike (q / k / v, gate / up).
// Under split_gather x is all-gathered once, through the layers' weights side by side (and
// kept for backward only as this rank's part; in inference each weight reads the gathered
// tokens where the collective holds them); in a decoding step whose layers are local nn.Linear
// products, one pass of the threads computes them all (kernels::skinny_products); otherwise
// each layer runs its forward().
std::vector<at::Tensor> forward_shared_input(const std::vector<Linear*>& layers,
                                             const at::Tensor& x);

// The linear block the policy names for ctx.path(). Throws ModelError for a style a linear
// layer cannot take or a size that does not divide by tp.
std::shared_ptr<Linear> make_linear(const BuildContext& ctx, int64_t in_features,
                                    int64_t out_features, LinearOptions options = {});

// Whether a column-parallel layer and the row-parallel layer that consumes its output are
// split (true) or both replicated (false). Throws ModelError naming the modules when the policy
// splits one but not the other (local features would feed a whole layer), or splits the column
// layer into other than `column_blocks` fused blocks (3 for a fused QKV: each rank must get its
// own slice of Q, K and V).
bool split_pair(const BuildContext& column, const BuildContext& row, int64_t column_blocks = 1);

}  // namespace shardformer::layers

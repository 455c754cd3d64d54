// Replicated, column-parallel and row-parallel linear blocks.
#include "shardformer/layers/linear.h"

#include "inference_kernels.h"
#include "sequence_parallel_linear.h"

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/distributed/comm_ops.h"
#include "shardformer/error.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/residual_norm.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::layers {
namespace {

bool conv1d(const LinearOptions& options) { return options.layout == WeightLayout::kConv1D; }

std::vector<int64_t> weight_shape(int64_t in, int64_t out, const LinearOptions& options) {
  return conv1d(options) ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
}

// The weight dimension holding output (column split) or input (row split) features.
int64_t out_dim(const LinearOptions& options) { return conv1d(options) ? 1 : 0; }
int64_t in_dim(const LinearOptions& options) { return conv1d(options) ? 0 : 1; }

}  // namespace

ReplicatedLinear::ReplicatedLinear(const BuildContext& ctx, int64_t in_features,
                                   int64_t out_features, LinearOptions options)
    : ReplicatedLinear(ctx, in_features, out_features, options, {}, {}) {}

ReplicatedLinear::ReplicatedLinear(const BuildContext& ctx, int64_t in_features,
                                   int64_t out_features, LinearOptions options,
                                   TensorShard weight_shard, TensorShard bias_shard)
    : options_(options) {
  weight_ = register_parameter(
      "weight", ctx.load("weight", weight_shape(in_features, out_features, options), weight_shard));
  local_in_ = weight_.size(in_dim(options));
  local_out_ = weight_.size(out_dim(options));
  if (options.bias)
    bias_ = register_parameter("bias", ctx.load("bias", {out_features}, bias_shard));
}

at::Tensor ReplicatedLinear::matmul(const at::Tensor& input) const {
  return project(input, weight_, {}, conv1d(options_));
}

at::Tensor ReplicatedLinear::forward(const at::Tensor& input) {
  return project(input, weight_, bias_, conv1d(options_));
}

std::optional<LocalWeights> ReplicatedLinear::local_weights() const {
  return LocalWeights{weight_, bias_, conv1d(options_)};
}

namespace {

// Ranks sharing each unit of a column split: tp / units when there are fewer units than ranks.
int64_t column_replicas(const BuildContext& ctx, const LinearOptions& options) {
  const int64_t units = options.column_units, tp = ctx.tp_size();
  if (units <= 0 || units >= tp) return 1;
  if (tp % units != 0) {
    throw ModelError(str(ctx.path(), ": ", units, " heads cannot be shared evenly by ", tp,
                         " tensor-parallel ranks (tp must divide by them or they by tp)"));
  }
  return tp / units;
}

// An uneven split names every rank's share of the split features, and they add up.
void check_split_sizes(const BuildContext& ctx, const LinearOptions& options, int64_t features) {
  int64_t sum = 0;
  for (int64_t n : options.split_sizes) sum += n > 0 ? n : features + 1;
  if (static_cast<int64_t>(options.split_sizes.size()) != ctx.tp_size() || sum != features ||
      (options.column_units > 0 && options.column_units < ctx.tp_size())) {
    throw ModelError(str(ctx.path(), ": an uneven split [", join(options.split_sizes, ", "),
                         "] of ", features, " features does not fit ", ctx.tp_size(),
                         " tensor-parallel ranks"));
  }
}

// Whether the layer's activations outside it are split along the sequence (split_gather).
bool split_gather(const BuildContext& ctx) {
  const ParallelContext* p = ctx.parallel();
  return p != nullptr && ctx.tensor_parallel() && p->config.enable_sequence_parallelism &&
         p->config.sequence_parallelism_mode == SequenceParallelMode::kSplitGather;
}

}  // namespace

Linear1D_Col::Linear1D_Col(const BuildContext& ctx, int64_t in_features, int64_t out_features,
                           LinearOptions options, ShardStyle style)
    : ReplicatedLinear(ctx, in_features, out_features, options,
                       TensorShard{.dim = out_dim(options),
                                   .fused_blocks = style.fused_blocks,
                                   .replicas = column_replicas(ctx, options),
                                   .sizes = options.split_sizes},
                       TensorShard{.dim = 0,
                                   .fused_blocks = style.fused_blocks,
                                   .replicas = column_replicas(ctx, options),
                                   .sizes = options.split_sizes}),
      group_(ctx.parallel()->tp),
      gather_output_(style.gather_output),
      sequence_split_(split_gather(ctx)),
      overlap_(sequence_split_ && ctx.parallel()->config.enable_sequence_overlap) {
  if (gather_output_ && (style.fused_blocks > 1 || column_replicas(ctx, options) > 1 ||
                         !options.split_sizes.empty())) {
    throw ModelError(str(ctx.path(), ": gather_output is not supported with fused blocks, ",
                         "heads shared by several ranks or an uneven split"));
  }
  if (gather_output_ && sequence_split_) {
    throw ModelError(str(ctx.path(), ": gather_output is not supported under sequence ",
                         "parallelism (split_gather)"));
  }
}

bool Linear1D_Col::gathers_into_product(const at::Tensor& x) const {
  return sequence_split_ && x.dim() == 3 && gemm_into_collective(x, weight_);
}

std::vector<at::Tensor> Linear1D_Col::gathered_products(const std::vector<Linear1D_Col*>& columns,
                                                        const at::Tensor& x) {
  const distributed::ProcessGroup& group = *columns.front()->group_;
  const int64_t batch = x.size(0), seq = x.size(1) * group.size();
  std::vector<at::Tensor> outputs, weights;  // [batch * seq, out/tp], [in, out/tp]
  for (const Linear1D_Col* c : columns) {
    outputs.push_back(at::empty({batch * seq, c->local_out_}, x.options()));
    weights.push_back(conv1d(c->options_) ? c->weight_ : c->weight_.t());
  }
  group.all_gather_consumed(x, [&](int64_t first, const at::Tensor& rows) {  // [n, in]
    for (size_t i = 0; i < columns.size(); ++i) {
      at::Tensor block = outputs[i].narrow(0, first, rows.size(0));  // [n, out/tp]
      kernels::gemm(rows, weights[i], columns[i]->bias_, false, block);
    }
  });
  for (at::Tensor& y : outputs) y = y.view({batch, seq, -1});
  return outputs;
}

at::Tensor Linear1D_Col::forward(const at::Tensor& input) {
  if (gathers_into_product(input)) return gathered_products({this}, input).front();
  if (sequence_split_) {  // [batch, seq/tp, in] -> [batch, seq, out/tp]
    const at::Tensor y =
        sequence_parallel_matmul(input, weight_, conv1d(options_), overlap_, *group_);
    return bias_.defined() ? y + bias_ : y;
  }
  const at::Tensor x = distributed::copy_to_parallel_region(input, *group_);  // [..., in]
  const at::Tensor y = ReplicatedLinear::forward(x);                          // [..., out/tp]
  return gather_output_ ? distributed::gather_from_parallel_region(y, *group_) : y;
}

std::optional<LocalWeights> Linear1D_Col::local_weights() const {
  if (gather_output_ || sequence_split_) return std::nullopt;
  return ReplicatedLinear::local_weights();
}

namespace {

// The layers' products of x in one pass of the threads, where each is a local nn.Linear
// product that the decoding kernel serves (inference, few rows): a decoding step's q / k / v
// then cost one parallel region, not three. Empty otherwise.
std::optional<std::vector<at::Tensor>> skinny_shared_input(const std::vector<Linear*>& layers,
                                                           const at::Tensor& x) {
  if (layers.size() < 2 || !use_inference_kernel({x})) return std::nullopt;
  std::vector<at::Tensor> weights, biases;
  for (const Linear* layer : layers) {
    std::optional<LocalWeights> local = layer->local_weights();
    if (!local || local->k_major || !kernels::skinny_linear_applies(x, local->weight)) {
      return std::nullopt;
    }
    weights.push_back(std::move(local->weight));
    biases.push_back(std::move(local->bias));
  }
  return kernels::skinny_products(x, weights, biases);
}

}  // namespace

std::vector<at::Tensor> forward_shared_input(const std::vector<Linear*>& layers,
                                             const at::Tensor& x) {
  std::vector<Linear1D_Col*> columns;
  for (Linear* layer : layers) {
    auto* column = dynamic_cast<Linear1D_Col*>(layer);
    if (column == nullptr || !column->sequence_split_) {
      columns.clear();
      break;
    }
    columns.push_back(column);
  }
  if (!columns.empty() && std::all_of(columns.begin(), columns.end(), [&](const Linear1D_Col* c) {
        return c->gathers_into_product(x);
      })) {
    return Linear1D_Col::gathered_products(columns, x);  // inference: gathered where it lies
  }
  if (std::any_of(columns.begin(), columns.end(), [](const Linear1D_Col* c) {
        return c->options_.layout != WeightLayout::kLinear;
      })) {
    columns.clear();
  }
  std::vector<at::Tensor> outputs;
  if (columns.empty()) {
    if (std::optional<std::vector<at::Tensor>> y = skinny_shared_input(layers, x)) return *y;
    // Each layer its own backward all-reduce: summing the input gradients before one
    // all-reduce rounds differently, and 20 training steps of tiny OPT amplified that to
    // 1.7e-4 from torch's losses (test_training's FamilyTraining).
    for (Linear* layer : layers) outputs.push_back(layer->forward(x));
    return outputs;
  }
  // split_gather: one gather of x for every layer, through their weights side by side.
  std::vector<at::Tensor> weights;
  std::vector<int64_t> sizes;
  for (const Linear1D_Col* c : columns) {
    weights.push_back(c->weight_);
    sizes.push_back(c->local_out_);
  }
  const Linear1D_Col& first = *columns.front();
  const at::Tensor y = sequence_parallel_matmul(x, at::cat(weights, 0), /*conv1d=*/false,
                                                first.overlap_, *first.group_);  // [b, seq, sum]
  const std::vector<at::Tensor> parts = y.split_with_sizes(sizes, -1);
  for (size_t i = 0; i < columns.size(); ++i) {
    const at::Tensor& bias = columns[i]->bias_;
    outputs.push_back(bias.defined() ? parts[i] + bias : parts[i]);
  }
  return outputs;
}

Linear1D_Row::Linear1D_Row(const BuildContext& ctx, int64_t in_features, int64_t out_features,
                           LinearOptions options, ShardStyle style)
    : ReplicatedLinear(ctx, in_features, out_features, options,
                       TensorShard{.dim = in_dim(options), .sizes = options.split_sizes},
                       TensorShard{}),
      group_(ctx.parallel()->tp),
      input_is_parallel_(style.input_is_parallel),
      sequence_split_(split_gather(ctx)) {}

std::function<void(int64_t, at::Tensor&)> Linear1D_Row::slot_producer(
    const at::Tensor& rows) const {
  const at::Tensor w = conv1d(options_) ? weight_ : weight_.t();               // [in/tp, out]
  return [rows, w](int64_t first, at::Tensor& block) {                         // block [n, out]
    kernels::gemm(rows.narrow(0, first, block.size(0)), w, {}, false, block);  // [n, in/tp] . w
  };
}

at::Tensor Linear1D_Row::forward(const at::Tensor& input) {
  const at::Tensor x =  // [..., in/tp]
      input_is_parallel_ ? input : distributed::scatter_to_parallel_region(input, *group_);
  if (group_->size() > 1 && (!sequence_split_ || x.dim() == 3) &&
      gemm_into_collective(x, weight_)) {
    // Inference: this rank's product goes straight into the group's shared slots and is summed
    // from there (under split_gather, only this rank's tokens), the bias added in the same pass.
    const at::Tensor rows = x.reshape({-1, x.size(-1)});  // [tokens, in/tp]
    const auto produce = slot_producer(rows);
    if (sequence_split_) {  // [batch, seq, in/tp] -> [batch, seq/tp, out]
      return group_->reduce_scatter_produced(x.size(0), x.size(1), local_out_, x.options(), produce,
                                             bias_);
    }
    auto shape = x.sizes().vec();
    shape.back() = local_out_;
    return group_->sum_produced(rows.size(0), local_out_, x.options(), produce, bias_).view(shape);
  }
  const at::Tensor y =  // [..., out], or [batch, seq/tp, out] under split_gather
      sequence_split_ ? distributed::reduce_scatter_forward_gather_backward(matmul(x), *group_, 1)
                      : distributed::reduce_from_parallel_region(matmul(x), *group_);
  return bias_.defined() ? y + bias_ : y;
}

namespace {

// residual + y and, given `norm`, its norm: the separate ops.
ResidualSum plus_residual(const at::Tensor& y, const at::Tensor& residual,
                          const ResidualNorm* norm) {
  if (norm == nullptr) return {residual + y, at::Tensor()};
  auto [sum, normed] = norm->add_forward(residual, y);
  return {std::move(sum), std::move(normed)};
}

}  // namespace

ResidualSum Linear::forward_residual(const at::Tensor& input, const at::Tensor& residual,
                                     const ResidualNorm* norm) {
  return plus_residual(forward(input), residual, norm);
}

ResidualSum add_to_residual(Linear& linear, const at::Tensor& input, Dropout* dropout,
                            const at::Tensor& residual, const ResidualNorm* norm,
                            const SequenceSplit* sequence) {
  if (dropout == nullptr || !dropout->active()) {
    return linear.forward_residual(input, residual, norm);
  }
  return plus_residual(dropout->forward(linear.forward(input), sequence), residual, norm);
}

namespace {

// sum = residual + the terms + bias and normed = norm(sum) (when a norm is given), in one pass
// over these rows (kernels::sum_add_norm).
void sum_add_norm_rows(const std::vector<at::Tensor>& terms, const at::Tensor& bias,
                       const at::Tensor& residual, const ResidualNorm* norm, const at::Tensor& sum,
                       const at::Tensor& normed) {
  const bool rms = norm != nullptr && norm->kind() == ResidualNorm::Kind::kRMSNorm;
  kernels::sum_add_norm(terms, bias, residual,
                        rms ? kernels::NormKind::kRMSNorm : kernels::NormKind::kLayerNorm,
                        norm != nullptr ? norm->weight() : at::Tensor(),
                        norm != nullptr ? norm->bias() : at::Tensor(),
                        norm != nullptr ? norm->eps() : 0.0, sum, normed);
}

}  // namespace

ResidualSum Linear1D_Row::forward_residual(const at::Tensor& input, const at::Tensor& residual,
                                           const ResidualNorm* norm) {
  const bool norm_in_kernel =
      norm == nullptr ||
      (kernel_layout(norm->weight()) && (!norm->bias().defined() || kernel_layout(norm->bias())));
  const int64_t tokens = residual.numel() / std::max<int64_t>(residual.size(-1), 1);
  const int64_t split = sequence_split_ ? group_->size() : 1;  // tokens of input per residual's
  if (!input_is_parallel_ || group_->size() == 1 || !norm_in_kernel ||
      !gemm_into_collective(input, weight_) || !use_inference_kernel({residual}) ||
      residual.size(-1) != local_out_ || input.numel() / input.size(-1) != tokens * split ||
      (sequence_split_ &&
       (input.dim() != 3 || residual.dim() != 3 || residual.size(0) != input.size(0)))) {
    return Linear::forward_residual(input, residual, norm);
  }
  // Inference: the products go into the group's shared slots, and one pass over them adds the
  // ranks' terms, the bias and the residual (and takes the norm), as the separate ops would.
  const at::Tensor rows = input.reshape({-1, input.size(-1)});  // [tokens, in/tp]
  if (!sequence_split_) {
    // The sum and its norm are the ranks' shared results: each rank computes its share of the
    // tokens (through shared memory) and reads the others' where they wrote them.
    const at::Tensor stream = residual.view({-1, local_out_});  // [tokens, out]
    const std::vector<at::Tensor> shared = group_->sum_produced_shared(
        rows.size(0), local_out_, input.options(), norm != nullptr ? 2 : 1, slot_producer(rows),
        [&](int64_t first, const std::vector<at::Tensor>& terms,
            const std::vector<at::Tensor>& outs) {  // [n, out] each
          const int64_t n = terms.front().size(0);
          sum_add_norm_rows(terms, bias_, stream.narrow(0, first, n), norm, outs[0],
                            norm != nullptr ? outs[1] : at::Tensor());
        });
    return {shared[0].view(residual.sizes()),
            norm != nullptr ? shared[1].view(residual.sizes()) : at::Tensor()};
  }
  // split_gather: each rank sums its own tokens [batch, seq/tp, out].
  ResidualSum out{at::empty_like(residual),
                  norm != nullptr ? at::empty_like(residual) : at::Tensor()};
  group_->reduce_scatter_produced_finished_by(
      input.size(0), input.size(1), local_out_, input.options(), slot_producer(rows),
      [&](int64_t o, int64_t at, const std::vector<at::Tensor>& terms) {
        const int64_t n = terms.front().size(0);
        sum_add_norm_rows(
            terms, bias_, residual.select(0, o).narrow(0, at, n), norm,
            out.sum.select(0, o).narrow(0, at, n),
            norm != nullptr ? out.normed.select(0, o).narrow(0, at, n) : at::Tensor());
      });
  return out;
}

std::shared_ptr<Linear> make_linear(const BuildContext& ctx, int64_t in_features,
                                    int64_t out_features, LinearOptions options) {
  const ShardStyle style = ctx.style();
  switch (style.kind) {
    case ShardKind::kReplicate:
      return std::make_shared<ReplicatedLinear>(ctx, in_features, out_features, options);
    case ShardKind::kColumn:
      if (!options.split_sizes.empty()) {
        check_split_sizes(ctx, options, out_features);
      } else if (options.column_units > 0 && options.column_units < ctx.tp_size()) {
        column_replicas(ctx, options);  // units shared by several ranks: checked there
      } else {
        ctx.divide_by_tp(
            options.column_units > 0 ? options.column_units : out_features / style.fused_blocks,
            ctx.name_of(options.column_units > 0 ? "heads" : "out_features per block"));
      }
      return std::make_shared<Linear1D_Col>(ctx, in_features, out_features, options, style);
    case ShardKind::kRow:
      if (!options.split_sizes.empty()) {
        check_split_sizes(ctx, options, in_features);
      } else {
        ctx.divide_by_tp(in_features, ctx.name_of("in_features"));
      }
      return std::make_shared<Linear1D_Row>(ctx, in_features, out_features, options, style);
    default:
      throw ModelError(str(ctx.path(), ": a linear layer cannot take shard style '",
                           shard_kind_name(style.kind), "'"));
  }
}

bool split_pair(const BuildContext& column, const BuildContext& row, int64_t column_blocks) {
  const ShardStyle c = column.style(), r = row.style();
  if (c.kind == ShardKind::kColumn && c.fused_blocks != column_blocks) {
    throw ModelError(str("policy splits '", column.path(), "' into ", c.fused_blocks,
                         " fused blocks; this layer holds ", column_blocks));
  }
  const bool column_split = c.kind == ShardKind::kColumn && !c.gather_output;
  const bool row_split = r.kind == ShardKind::kRow && r.input_is_parallel;
  if (column_split != row_split) {
    throw ModelError(str("policy splits '", column_split ? column.path() : row.path(),
                         "' but not '", column_split ? row.path() : column.path(),
                         "': a column-parallel layer must feed a row-parallel one (or both "
                         "stay replicated)"));
  }
  return column_split;
}

}  // namespace shardformer::layers

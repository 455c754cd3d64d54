// Self-attention with separate q / k / v / o projections under HF's names, shared by Llama,
// Mistral, Qwen2, Qwen3 and OPT: grouped-query heads (KV heads fewer than tp are each held by
// tp / kv_heads ranks, as Megatron and vLLM do), optional biases, rotary embeddings and
// Qwen3's per-head q / k RMSNorm. Under tensor parallelism q / k / v are column-parallel by
// heads and the output projection row-parallel, as the family's policy says.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/attention.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/rms_norm.h"
#include "shardformer/model.h"
#include "shardformer/parallel/sequence_split.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <utility>

namespace shardformer::layers {

struct SelfAttentionOptions {
  int64_t hidden_size = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool qkv_bias = false, out_bias = false;
  bool key_bias = true;             // with qkv_bias, k_proj's too (Whisper's k_proj has none)
  double scale = 0;                 // 0: head_dim^-0.5
  bool scale_queries = false;       // multiply q by the scale before q . k (OPT), not the scores
  double dropout = 0;               // on the attention probabilities, in training
  double qk_norm_eps = 0;           // > 0: q_norm / k_norm, RMSNorm over each head (Qwen3)
  // Module paths under the attention's own (dotted ones nest: ViT's "attention.query" and
  // "output.dense").
  std::string out_name = "o_proj";  // OPT: "out_proj"
  std::string q_name = "q_proj", k_name = "k_proj", v_name = "v_proj";  // T5: "q", "k", "v"
};

// What every layer's attention shares in one forward pass.
struct AttentionStep {
  at::Tensor mask{};         // from attention_mask()
  bool causal = false;       // ForwardStep::causal (plain causal, no mask tensor)
  at::Tensor cos{}, sin{};   // rotary, from RotaryEmbedding::cos_sin; undefined: no rotary
  bool interleaved = false;  // RotaryEmbedding::interleaved (GPT-J's pairs)
  at::Tensor bias{};         // added to the scores: ALiBi [batch, heads/tp, 1, kv] (BLOOM, MPT)
  KVCache* cache = nullptr;
  std::shared_ptr<const SequenceSplit> sequence{};  // ForwardStep::sequence (null: not split)
};

// The arguments of layers::attention() for a layer in `step`: the step's mask, bias, cache and
// split with the layer's own scale, dropout and index.
AttentionArgs attention_args(const AttentionStep& step, double scale, Dropout* dropout,
                             int64_t layer);

// `full` with the mask of a sliding window of `window` keys instead (Mistral's sliding layers,
// GPT-Neo's local ones), for a forward pass whose chunk starts at first_layer.
AttentionStep with_window(const AttentionStep& full, const ForwardInputs& inputs,
                          int64_t first_layer, int64_t window, const SequenceParallelism& sp);

class SelfAttention : public torch::nn::Module {
 public:
  SelfAttention(const BuildContext& ctx, const SelfAttentionOptions& options, int64_t layer_idx);
  // x [batch, seq, hidden] -> [batch, seq, hidden]
  at::Tensor forward(const at::Tensor& x, const AttentionStep& step);
  // residual + dropout(forward(x)) and, given `norm`, its norm (add_to_residual): where the
  // output projection sums its ranks' products, the residual add and the norm join that pass.
  ResidualSum forward_residual(const at::Tensor& x, const AttentionStep& step,
                               const at::Tensor& residual, const ResidualNorm* norm,
                               Dropout* dropout = nullptr);
  int64_t num_kv_heads() const { return kv_heads_; }  // this rank's

 private:
  // The heads' outputs before the output projection: [batch, seq, heads * head_dim / tp].
  at::Tensor attend(const at::Tensor& x, const AttentionStep& step);

  int64_t layer_idx_, heads_, kv_heads_, head_dim_;  // heads_ / kv_heads_: this rank's
  double scale_;
  bool scale_queries_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;
  std::shared_ptr<Dropout> dropout_;
};

// How the query and KV heads are split over the tp ranks: per rank, its query and KV heads.
// Each rank holds whole groups of query heads with their KV head, the ranks differing by at most
// one group, so that any head count splits (SmolLM2's 9 and 3 at tp 2: 6 + 2 and 3 + 1). With
// fewer KV heads than ranks (tp a multiple of them) each KV head is shared by tp / kv ranks,
// which split its group's query heads, differing by at most one (Falcon-7B's 71 and 1).
struct HeadSplit {
  std::vector<int64_t> heads;              // query heads of each rank
  std::vector<int64_t> kv_heads;           // KV heads of each rank
  bool even() const;                       // every rank the same: the plain Megatron split
  int64_t first_head(int64_t rank) const;  // the first query head rank holds
};
// Throws ModelError where the heads cannot split over ctx's tp ranks, or split unevenly under
// sequence parallelism (whose exchanges need equal shares).
HeadSplit split_heads(const BuildContext& ctx, int64_t heads, int64_t kv_heads);

// What separate q / k / v / o projections of `heads` query and `kv_heads` key/value heads hold on
// this rank, split over tp or not (split: the policy splits them): its heads, and the linear
// options (column units, uneven split sizes; biases off) of q, of k and v, and of the output.
struct HeadProjections {
  int64_t heads = 0, kv_heads = 0, first_head = 0;  // this rank's
  HeadSplit split{};                                // every rank's (empty: not split)
  LinearOptions q{}, kv{}, out{};
};
HeadProjections head_projections(const BuildContext& ctx, bool split, int64_t heads,
                                 int64_t kv_heads, int64_t head_dim);
// The same for projections under these names in ctx's module, split as the policy says there;
// throws ModelError when it splits q, k and v differently.
struct ProjectionNames {
  std::string q, k, v, out;
};
HeadProjections head_projections(const BuildContext& ctx, const ProjectionNames& names,
                                 int64_t heads, int64_t kv_heads, int64_t head_dim);

}  // namespace shardformer::layers

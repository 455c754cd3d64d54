// Each tensor-parallel layer at 2 and 4 ranks against the same computation in plain ATen
// (matmul, embedding, cross_entropy on the whole weights): outputs, input gradients and weight
// gradients (gathered back to the full tensor) must be equal. Also the vocab-parallel LM head
// with its cross-entropy against the full-vocabulary loss, and layout-independent dropout.
#include "multiprocess.h"
#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/kernel_timing.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/embedding.h"
#include "shardformer/layers/gated_mlp.h"
#include "shardformer/layers/layer_norm.h"
#include "shardformer/layers/linear.h"
#include "shardformer/layers/rms_norm.h"
#include "shardformer/losses.h"
#include "shardformer/runtime/inference_scope.h"
#include "tensor_util.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

using namespace shardformer;
using shardformer::testing::expect_all_ranks_passed;
using shardformer::testing::run_ranks;

namespace {

using shardformer::testing::seeded;

// Tolerances of the quality bar: gradients atol 1e-6, outputs atol 1e-5, both rtol 1e-4.
void expect_equal(const at::Tensor& actual, const at::Tensor& expected, const std::string& what,
                  double atol = 1e-6) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  EXPECT_TRUE(at::allclose(actual, expected, 1e-4, atol))
      << what << ": max diff " << (actual - expected).abs().max().item<double>();
}

// One rank: a private checkpoint folder with the layers' full weights, its mesh, and build
// contexts for the unsharded layer and for the sharded one under `policy`.
struct LayerRank {
  LayerRank(int rank, int tp, int port, const std::map<std::string, at::Tensor>& weights,
            Policy policy, int64_t vocab_multiple = 1)
      : dir(std::filesystem::path(::testing::TempDir()) /
            ("shardformer_layers_" + std::to_string(port) + "_" + std::to_string(rank))),
        mesh(rank, {.tp = tp}, options(port)) {
    at::set_num_threads(1);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << "{}";
    save_safetensors(dir / "model.safetensors", weights);
    checkpoint = std::make_unique<Checkpoint>(dir);
    parallel.tp = &mesh.tp();
    parallel.policy = std::move(policy);
    parallel.config.make_vocab_size_divisible_by = vocab_multiple;
    full.emplace(*checkpoint, at::kFloat, at::kCPU);
    sharded.emplace(*checkpoint, at::kFloat, at::kCPU, "", &parallel);
  }
  ~LayerRank() { std::filesystem::remove_all(dir); }

  static distributed::MeshOptions options(int port) {
    distributed::MeshOptions o;
    o.master_port = port;
    return o;
  }
  // The sharded parameter's gradient as the full tensor.
  at::Tensor full_grad(const std::string& name, const at::Tensor& param) const {
    const auto& plan = *sharded->plan();
    const auto shard = plan.find(name);
    return shard == plan.end() ? param.grad()
                               : gather_shard(param.grad(), shard->second, mesh.tp());
  }

  std::filesystem::path dir;
  distributed::ProcessMesh mesh;
  std::unique_ptr<Checkpoint> checkpoint;
  ParallelContext parallel;
  std::optional<BuildContext> full, sharded;  // roots: the sharded one records the plan
};

at::Tensor param(const torch::nn::Module& module, const std::string& name) {
  return module.named_parameters()[name];
}

// Runs x through the sharded linear layer and through plain ATen on the whole weights, backward
// with the same upstream gradient, and compares output, input gradient and weight gradients.
void check_linear(int tp, ShardStyle style, layers::LinearOptions options, bool input_split) {
  const int64_t in = 8 * tp, out = 12 * tp;
  const bool conv1d = options.layout == layers::WeightLayout::kConv1D;
  std::map<std::string, at::Tensor> weights{
      {"fc.weight", seeded(1, conv1d ? at::IntArrayRef{in, out} : at::IntArrayRef{out, in})},
      {"fc.bias", seeded(2, {out})},
      {"weight", seeded(11, {out})},  // a LayerNorm after the layer
      {"bias", seeded(12, {out})}};
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    LayerRank r(rank, tp, port, weights, Policy({{"fc", style}}));
    const auto sharded = layers::make_linear(r.sharded->child("fc"), in, out, options);
    const at::Tensor weight = weights.at("fc.weight").clone().requires_grad_(true);
    const at::Tensor bias = weights.at("fc.bias").clone().requires_grad_(true);
    const at::Tensor x_full = seeded(3, {2, 5, in}).requires_grad_(true);  // [batch, seq, in]
    const at::Tensor x_local =
        (input_split ? x_full.detach().chunk(tp, -1)[rank] : x_full.detach()).requires_grad_(true);
    const at::Tensor y_full =  // [batch, seq, out]
        at::matmul(x_full, conv1d ? weight : weight.t()) + bias;
    const at::Tensor y = sharded->forward(x_local);
    // The output columns this rank holds: its slice of each fused block, or all of them.
    at::Tensor columns = at::arange(out);
    if (style.kind == ShardKind::kColumn && !style.gather_output) {
      const int64_t block = out / style.fused_blocks, piece = block / tp;
      std::vector<at::Tensor> pieces;
      for (int64_t b = 0; b < style.fused_blocks; ++b) {
        pieces.push_back(at::arange(b * block + rank * piece, b * block + (rank + 1) * piece));
      }
      columns = at::cat(pieces);
    }
    expect_equal(y, y_full.detach().index_select(-1, columns), "output", 1e-5);
    if (style.kind == ShardKind::kRow) {  // more rows than the skinny kernel takes, without
      // gradients: the row-parallel product goes straight into the all-reduce's shared slots
      const at::NoGradGuard no_grad;
      static_assert(3 * 11 > kernels::kSkinnyRows, "33 rows must take the GEMM");
      const at::Tensor many = seeded(9, {3, 11, in});  // 33 rows
      const at::Tensor mine = input_split ? many.chunk(tp, -1)[rank].contiguous() : many;
      // Inference throughout, its first product made before: on MKL's path every product below
      // then reads the weight's packed copy (made at its second product), whose bits can differ
      // from ATen's unpacked product in the last place (MKL's AVX2 code).
      const runtime::InferenceScope inference;
      sharded->forward(mine);
      const at::Tensor y_many = sharded->forward(mine);
      expect_equal(y_many, at::matmul(many, conv1d ? weight : weight.t()) + bias,
                   "output of 33 rows", 1e-5);
      // Added to a residual stream and normed for the next sublayer: through the slots in one
      // pass where the input is split, bit for bit the separate output, add and norm.
      const layers::LayerNorm norm(*r.full, out, 1e-5);
      const at::Tensor residual = seeded(10, {3, 11, out});
      const auto [sum, normed] = norm.add_forward(residual, y_many);
      const layers::ResidualSum fused = sharded->forward_residual(mine, residual, &norm);
      EXPECT_TRUE(at::equal(fused.sum, sum)) << "residual sum";
      EXPECT_TRUE(at::equal(fused.normed, normed)) << "residual sum's norm";
      const layers::RMSNorm rms(*r.full, out, 1e-6);  // Llama's
      const auto [rms_sum, rms_normed] = rms.add_forward(residual, y_many);
      const layers::ResidualSum rms_fused = sharded->forward_residual(mine, residual, &rms);
      EXPECT_TRUE(at::equal(rms_fused.sum, rms_sum)) << "residual sum (RMSNorm)";
      EXPECT_TRUE(at::equal(rms_fused.normed, rms_normed)) << "residual sum's RMSNorm";
      const layers::ResidualSum unnormed = sharded->forward_residual(mine, residual, nullptr);
      EXPECT_TRUE(at::equal(unnormed.sum, residual + y_many)) << "residual sum without a norm";
      EXPECT_FALSE(unnormed.normed.defined());
    }
    const at::Tensor upstream = seeded(4, y_full.sizes());
    (y_full * upstream).sum().backward();
    (y * upstream.index_select(-1, columns)).sum().backward();
    const at::Tensor expected_x_grad =
        input_split ? x_full.grad().chunk(tp, -1)[rank] : x_full.grad();
    expect_equal(x_local.grad(), expected_x_grad, "input grad");
    expect_equal(r.full_grad("fc.weight", param(*sharded, "weight")), weight.grad(), "weight grad");
    expect_equal(r.full_grad("fc.bias", param(*sharded, "bias")), bias.grad(), "bias grad");
  }));
}

class ParallelLayers : public ::testing::TestWithParam<int> {};

}  // namespace

TEST_P(ParallelLayers, Linear1DColMatchesTheFullLayer) {
  check_linear(GetParam(), {.kind = ShardKind::kColumn}, {}, false);
}

TEST_P(ParallelLayers, Linear1DColGatherOutputMatchesTheFullLayer) {
  check_linear(GetParam(), {.kind = ShardKind::kColumn, .gather_output = true}, {}, false);
}

TEST_P(ParallelLayers, Linear1DColFusedConv1DMatchesTheFullLayer) {
  check_linear(GetParam(), {.kind = ShardKind::kColumn, .fused_blocks = 3},
               {.layout = layers::WeightLayout::kConv1D}, false);
}

TEST_P(ParallelLayers, Linear1DRowWithParallelInputMatchesTheFullLayer) {
  check_linear(GetParam(), {.kind = ShardKind::kRow}, {}, true);
}

TEST_P(ParallelLayers, Linear1DRowSplittingItsInputMatchesTheFullLayer) {
  check_linear(GetParam(), {.kind = ShardKind::kRow, .input_is_parallel = false},
               {.layout = layers::WeightLayout::kConv1D}, false);
}

// Embeddings: a vocabulary of 13 (divisible by no tp) with ids covering every row, and the
// tied LM head with vocab-parallel cross-entropy, against at::embedding, a matmul and
// at::cross_entropy of HF's shifted causal-LM loss on the whole weight.
void check_embedding(int tp, ShardKind kind) {
  const int64_t vocab = 13, dim = 4 * tp;
  const std::map<std::string, at::Tensor> weights{{"wte.weight", seeded(5, {vocab, dim})}};
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    LayerRank r(rank, tp, port, weights, Policy({{"wte", ShardStyle{.kind = kind}}}));
    const auto sharded = layers::make_embedding(r.sharded->child("wte"), vocab, dim);
    const at::Tensor weight = weights.at("wte.weight").clone().requires_grad_(true);
    const at::Tensor ids = at::arange(vocab).view({1, vocab}).repeat({2, 1});  // [2, 13]
    const at::Tensor hidden_full = seeded(6, {2, vocab, dim}).requires_grad_(true);
    const at::Tensor hidden = hidden_full.detach().clone().requires_grad_(true);
    const at::Tensor lookup = at::embedding(weight, ids);  // [2, 13, dim]
    expect_equal(sharded->forward(ids), lookup.detach(), "lookup", 1e-5);
    const at::Tensor labels =
        at::randint(0, vocab, {2, vocab}, at::make_generator<at::CPUGeneratorImpl>(7));
    const at::Tensor logits_full = at::matmul(hidden_full, weight.t());  // [2, 13, vocab]
    const at::Tensor loss_full =
        at::cross_entropy_loss(logits_full.narrow(1, 0, vocab - 1).reshape({-1, vocab}),
                               labels.narrow(1, 1, vocab - 1).reshape({-1}));
    const at::Tensor loss =
        causal_lm_loss(sharded->lm_logits(hidden, layers::LogitsGather::kNone), labels);
    expect_equal(loss.detach(), loss_full.detach(), "loss", 1e-5);
    expect_equal(sharded->lm_logits(hidden, layers::LogitsGather::kAll).logits.detach(),
                 logits_full.detach(), "gathered logits", 1e-5);
    {  // more rows than the skinny kernel takes, without gradients (the vocab-parallel head
       // computes into its columns of the gathered logits where kernels::gemm runs)
      const at::NoGradGuard no_grad;
      static_assert(3 * 11 > kernels::kSkinnyRows, "33 rows must take the GEMM");
      const at::Tensor many = seeded(9, {3, 11, dim});  // 33 rows
      expect_equal(sharded->lm_logits(many, layers::LogitsGather::kAll).logits,
                   at::matmul(many, weight.t()), "gathered logits of 33 rows", 1e-5);
      // Only rank 0 receiving them: the vocab-parallel head leaves the others without logits.
      const at::Tensor first = sharded->lm_logits(many, layers::LogitsGather::kFirstRank).logits;
      if (rank == 0 || kind != ShardKind::kVocab) {
        expect_equal(first, at::matmul(many, weight.t()), "logits of 33 rows on rank 0", 1e-5);
      } else {
        EXPECT_FALSE(first.defined()) << "rank " << rank << " received the logits";
      }
    }
    const at::Tensor upstream = seeded(8, {2, vocab, dim});
    ((lookup * upstream).sum() + loss_full).backward();
    ((sharded->forward(ids) * upstream).sum() + loss).backward();
    expect_equal(hidden.grad(), hidden_full.grad(), "hidden grad");
    expect_equal(r.full_grad("wte.weight", param(*sharded, "weight")), weight.grad(),
                 "weight grad");
  }));
}

TEST_P(ParallelLayers, VocabParallelEmbeddingAndLossMatchTheFullLayer) {
  check_embedding(GetParam(), ShardKind::kVocab);
}

TEST_P(ParallelLayers, Embedding1DAndItsHeadMatchTheFullLayer) {
  check_embedding(GetParam(), ShardKind::kEmbeddingDim);
}

TEST(ParallelDropout, MasksDoNotDependOnTheTensorParallelLayout) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    LayerRank r(rank, 2, port, {{"unused", at::zeros({1})}}, Policy());
    const at::Tensor x = at::ones({8, 4, 16, 16});  // [batch, heads, q, kv]
    // Replicated activation: the same mask on every rank, and the one a single rank draws.
    layers::Dropout replicated(r.sharded->child("drop_a"), 0.25);
    layers::Dropout alone(r.full->child("drop_a"), 0.25);
    const at::Tensor a = replicated.forward(x);
    const at::Tensor a_all = r.mesh.tp().all_gather(a.unsqueeze(0), 0);  // [tp, ...]
    EXPECT_TRUE(at::equal(a_all[0], a_all[1])) << "replicated input: masks differ across ranks";
    EXPECT_TRUE(at::equal(a, alone.forward(x))) << "tp = 2 drops other elements than tp = 1";
    // Heads split over the ranks: together they drop what one rank holding every head drops.
    layers::Dropout split(r.sharded->child("attn_dropout"), 0.25,
                          {.dim = 1, .total = 4, .first = 2 * rank, .count = 2});
    layers::Dropout whole(r.full->child("attn_dropout"), 0.25,
                          {.dim = 1, .total = 4, .first = 0, .count = 4});
    const at::Tensor mine = split.forward(x.narrow(1, 2 * rank, 2));  // [8, 2, 16, 16]
    const at::Tensor gathered = r.mesh.tp().all_gather(mine, 1);      // [8, 4, 16, 16]
    EXPECT_TRUE(at::equal(gathered, whole.forward(x))) << "a head's mask depends on its rank";
    EXPECT_FALSE(at::equal(gathered.select(1, 0), gathered.select(1, 1))) << "heads share a stream";
    layers::Dropout other(r.sharded->child("drop_c"), 0.25);
    EXPECT_FALSE(at::equal(a, other.forward(x))) << "two modules share one stream";
  }));
}

TEST(ParallelDropout, DataParallelRanksDrawDifferentMasks) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    at::set_num_threads(1);
    distributed::ProcessMesh mesh(rank, {.dp = 2}, LayerRank::options(port));
    const auto dir =
        std::filesystem::path(::testing::TempDir()) /
        ("shardformer_dp_dropout_" + std::to_string(port) + "_" + std::to_string(rank));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "config.json") << "{}";
    save_safetensors(dir / "model.safetensors", {{"unused", at::zeros({1})}});
    const Checkpoint checkpoint(dir);
    ParallelContext parallel;
    parallel.dp = &mesh.dp();
    const BuildContext ctx(checkpoint, at::kFloat, at::kCPU, "", &parallel);
    layers::Dropout dropout(ctx.child("drop"), 0.5);
    const at::Tensor mask = dropout.forward(at::ones({64, 64}));
    const at::Tensor both = mesh.dp().all_gather(mask.unsqueeze(0), 0);
    EXPECT_FALSE(at::equal(both[0], both[1])) << "data-parallel replicas drew the same mask";
    std::filesystem::remove_all(dir);
  }));
}

// A decoding step (one token, no gradients) through a column-split gated MLP and through q / k /
// v reading one input: gate and up run as one pass with the SiLU gate (skinny_silu_gate), the
// column layers' products as one pass (skinny_products), equal to the full layers in ATen.
TEST_P(ParallelLayers, DecodingGatedMlpAndSharedInputTakeOnePassEach) {
  const int tp = GetParam();
  const int64_t hidden = 8 * tp, inter = 12 * tp;
  const std::map<std::string, at::Tensor> weights{
      {"mlp.gate_proj.weight", seeded(1, {inter, hidden})},
      {"mlp.up_proj.weight", seeded(2, {inter, hidden})},
      {"mlp.down_proj.weight", seeded(3, {hidden, inter})},
      {"q.weight", seeded(4, {hidden, hidden})},
      {"q.bias", seeded(5, {hidden})},
      {"k.weight", seeded(6, {2 * tp, hidden})}};
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    LayerRank r(rank, tp, port, weights,
                Policy({{"mlp.gate_proj", {.kind = ShardKind::kColumn}},
                        {"mlp.up_proj", {.kind = ShardKind::kColumn}},
                        {"mlp.down_proj", {.kind = ShardKind::kRow}},
                        {"q", {.kind = ShardKind::kColumn}},
                        {"k", {.kind = ShardKind::kColumn}}}));
    layers::GatedMLP mlp(r.sharded->child("mlp"), hidden, inter, layers::Activation::kSilu,
                         /*bias=*/false);
    const auto q = layers::make_linear(r.sharded->child("q"), hidden, hidden, {});
    const auto k = layers::make_linear(r.sharded->child("k"), hidden, 2 * tp, {.bias = false});
    const at::Tensor x = seeded(7, {1, 1, hidden});  // [batch, 1 token, hidden]
    const at::NoGradGuard no_grad;
    const runtime::InferenceScope inference;
    kernels::reset_kernel_times();
    kernels::set_kernel_timing(true);
    const at::Tensor y = mlp.forward(x);
    const std::vector<at::Tensor> qk = layers::forward_shared_input({q.get(), k.get()}, x);
    kernels::set_kernel_timing(false);
    std::set<std::string> kernels_run;
    for (const kernels::KernelTime& t : kernels::kernel_times()) {
      kernels_run.insert(t.call.substr(0, t.call.find(' ')));
    }
    EXPECT_TRUE(kernels_run.count("skinny_silu_gate")) << "the gated MLP's one pass";
    EXPECT_TRUE(kernels_run.count("skinny_products")) << "q and k's one pass";
    const auto& w = weights;
    const at::Tensor h = at::silu(at::linear(x, w.at("mlp.gate_proj.weight"))) *
                         at::linear(x, w.at("mlp.up_proj.weight"));
    expect_equal(y, at::linear(h, w.at("mlp.down_proj.weight")), "gated MLP output", 1e-5);
    expect_equal(qk[0], at::linear(x, w.at("q.weight"), w.at("q.bias")).chunk(tp, -1)[rank], "q",
                 1e-5);
    expect_equal(qk[1], at::linear(x, w.at("k.weight")).chunk(tp, -1)[rank], "k", 1e-5);
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ParallelLayers, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

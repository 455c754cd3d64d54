// GPT-2 under tensor parallelism (tp = 1, 2, 4; Gloo, one process per rank) against HF
// transformers: logits, the LM loss and every parameter's gradient (gathered, padding
// trimmed), greedy generation, the collectives of one forward, policy overrides, and the
// refusal of sizes that do not divide by tp. The vocabulary (1013) divides by no tp.
#include "gpt2_fixture.h"
#include "multiprocess.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"

#include <ATen/Parallel.h>

using namespace shardformer;
using shardformer::testing::expect_all_ranks_passed;
using shardformer::testing::expect_close;
using shardformer::testing::run_ranks;

namespace {

// One rank's view: its mesh and the parallel context a job would hand the plugin.
struct Rank {
  Rank(int rank, int tp, int port, ShardConfig config = {}, Policy overrides = {})
      : mesh(rank, {.tp = tp}, shardformer::testing::local_mesh_options(port)) {
    at::set_num_threads(1);  // several ranks share this machine's cores
    parallel.tp = &mesh.tp();
    parallel.config = config;
    parallel.policy = std::move(overrides);
  }
  distributed::ProcessMesh mesh;
  ParallelContext parallel;
};

// Loss and every gradient after one backward pass, against HF's.
void expect_loss_and_grads_match_hf(const shardformer::testing::Gpt2Fixture& f, Model& model,
                                    const distributed::ProcessGroup* tp) {
  const at::Tensor loss = model.lm_loss(f.forward_inputs(), f.ref("train_labels"));
  expect_close(loss.detach().reshape({1}), f.ref("train_loss"), 1e-5, 1e-3, "loss");
  loss.backward();
  const auto grads = gather_parameters(model, tp, /*grads=*/true);
  EXPECT_EQ(grads.size(), f.grad_names().size());
  for (const auto& [name, grad] : grads) {
    expect_close(grad, f.ref("grad." + name), 1e-6, 1e-4, "grad of " + name);
  }
}

class Gpt2TensorParallel : public ::testing::TestWithParam<int> {};

}  // namespace

TEST_P(Gpt2TensorParallel, LogitsLossAndGradientsMatchHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    expect_close(f.forward(*model), f.ref("forward_logits"), 1e-5, 0.0, "logits");
    expect_loss_and_grads_match_hf(f, *model, &r.mesh.tp());
  }));
}

TEST_P(Gpt2TensorParallel, GatheredLogitsLossMatchesHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, tp, port, ShardConfig{.parallel_output = false});
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    expect_loss_and_grads_match_hf(f, *model, &r.mesh.tp());
  }));
}

TEST_P(Gpt2TensorParallel, GreedyGenerationMatchesHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    EXPECT_EQ(model->shape().num_heads, 4 / tp);
    const GenerationResult result =
        greedy_generate(*model, f.prompts(), f.generation_config(/*with_eos=*/true));
    EXPECT_TRUE(at::equal(result.sequences, f.ref("generate_eos_sequences")))
        << "rank " << rank << " ours:\n"
        << result.sequences;
  }));
}

TEST_P(Gpt2TensorParallel, BaseModelHiddenStatesMatchHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2Model", &r.parallel);
    expect_close(f.forward(*model), f.ref("forward_last_hidden_state"), 1e-5, 0.0, "hidden");
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Gpt2TensorParallel, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(Gpt2TensorParallelComm, OneForwardAllReducesTwicePerBlockPlusTheEmbedding) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    r.mesh.tp().reset_stats();
    f.forward(*model);
    const auto stats = r.mesh.tp().stats();
    const at::Tensor ids = f.ref("forward_input_ids");
    const int64_t layers = model->shape().num_layers, hidden = 64, tokens = ids.numel();
    EXPECT_EQ(stats.all_reduces, 2 * layers + 1);
    EXPECT_EQ(stats.all_reduce_elements, (2 * layers + 1) * tokens * hidden);
    EXPECT_EQ(stats.all_gathers, 1);  // the logits, for the caller
  }));
}

TEST(Gpt2TensorParallelDropout, TrainingDropsTheSameElementsOnEveryRank) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    model->train();
    const at::Tensor logits = f.forward(*model);  // [batch, seq, vocab], dropout active
    EXPECT_FALSE(at::allclose(logits, f.ref("forward_logits"), 1e-3, 1e-3)) << "no dropout";
    // Replicated activations must stay replicated: every rank ends with the same logits.
    const at::Tensor all = r.mesh.tp().all_gather(logits.unsqueeze(0), 0);
    EXPECT_TRUE(at::equal(all[0], all[1])) << "ranks drew different dropout masks";
  }));
}

TEST(Gpt2TensorParallelPolicy, JobOverrideKeepingTheMlpReplicatedStillMatchesHF) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Policy overrides(
        std::vector<PolicyRule>{{"h.*.mlp.c_fc", ShardStyle{}}, {"h.*.mlp.c_proj", ShardStyle{}}});
    Rank r(rank, 2, port, ShardConfig{}, overrides);
    const auto model = f.build("GPT2LMHeadModel", &r.parallel);
    for (const auto& [name, shard] : model->sharding()) {
      EXPECT_EQ(name.find(".mlp."), std::string::npos) << name << " is split";
    }
    expect_close(f.forward(*model), f.ref("forward_logits"), 1e-5, 0.0, "logits");
    expect_loss_and_grads_match_hf(f, *model, &r.mesh.tp());
  }));
}

TEST(Gpt2TensorParallelPolicy, HalfSplitPairIsRefused) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, 2, port, ShardConfig{},
           Policy(std::vector<PolicyRule>{{"h.*.mlp.c_proj", ShardStyle{}}}));
    try {
      f.build("GPT2LMHeadModel", &r.parallel);
      ADD_FAILURE() << "expected ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("must feed a row-parallel one"), std::string::npos)
          << e.what();
    }
  }));
}

TEST(Gpt2TensorParallelPolicy, HeadsNotDividingByTpAreRefusedBeforeLoading) {
  expect_all_ranks_passed(run_ranks(3, [&](int rank, int port) {
    const shardformer::testing::Gpt2Fixture f;
    Rank r(rank, 3, port);
    try {
      f.build("GPT2LMHeadModel", &r.parallel);
      ADD_FAILURE() << "expected ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("n_head = 4 does not divide by the tensor-parallel "
                                           "size 3"),
                std::string::npos)
          << e.what();
    }
  }));
}

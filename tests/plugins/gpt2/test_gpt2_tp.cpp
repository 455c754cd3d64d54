// GPT-2 under tensor parallelism (tp = 1, 2, 4; Gloo, one process per rank) against HF
// transformers: logits, the LM loss and every parameter's gradient (gathered, padding
// trimmed), greedy generation, the untied head, the collectives of one forward and of the
// loss, dropout that does not depend on the layout, ShardConfig switches, policy overrides,
// and the refusal of sizes that do not divide by tp. The vocabulary (1013) divides by no tp.
#include "gpt2_fixture.h"
#include "multiprocess.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"

#include <ATen/Parallel.h>

using namespace shardformer;
using shardformer::testing::expect_all_ranks_passed;
using shardformer::testing::expect_close;
using shardformer::testing::expect_close_to_hf;
using shardformer::testing::expect_loss_and_grads_match;
using shardformer::testing::Gpt2Fixture;
using shardformer::testing::kOutputAtol;
using shardformer::testing::run_ranks;

namespace {

// One rank of a tp-rank job: its mesh; models are built through the fixture's Session.
struct Rank {
  Rank(int rank, int tp, int port)
      : mesh(rank, {.tp = tp}, shardformer::testing::local_mesh_options(port)) {
    at::set_num_threads(1);  // several ranks share this machine's cores
  }
  distributed::ProcessMesh mesh;
};

class Gpt2TensorParallel : public ::testing::TestWithParam<int> {};

// HF's greedy generations, with and without an early eos, token for token on this rank.
void expect_generations_match(Session& session, const Gpt2Fixture& f, int rank) {
  for (const bool with_eos : {false, true}) {
    const GenerationResult result = session.generate(f.prompts(), f.generation_config(with_eos));
    const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
    EXPECT_TRUE(at::equal(result.sequences, f.ref(key))) << key << ", rank " << rank << ":\n"
                                                         << result.sequences;
  }
}

}  // namespace

TEST_P(Gpt2TensorParallel, LogitsLossAndGradientsMatchHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2LMHeadModel", &r.mesh);
    expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    expect_loss_and_grads_match(f, *model, &r.mesh.tp());
  }));
}

TEST_P(Gpt2TensorParallel, GatheredLogitsLossMatchesHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model =
        f.build("GPT2LMHeadModel", &r.mesh, {.shard = ShardConfig{.parallel_output = false}});
    expect_loss_and_grads_match(f, *model, &r.mesh.tp());
  }));
}

TEST_P(Gpt2TensorParallel, GreedyGenerationMatchesHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto session = f.session({}, &r.mesh);
    EXPECT_EQ(session->model().shape().num_heads, 4 / tp);
    expect_generations_match(*session, f, rank);
  }));
}

TEST_P(Gpt2TensorParallel, BaseModelHiddenStatesMatchHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2Model", &r.mesh);
    expect_close(f.forward(*model), f.ref("forward_last_hidden_state"), kOutputAtol, 0.0, "hidden");
  }));
}

TEST_P(Gpt2TensorParallel, UntiedHeadMatchesHF) {
  const int tp = GetParam();
  expect_all_ranks_passed(run_ranks(tp, [&](int rank, int port) {
    const Gpt2Fixture f("tiny-gpt2-untied");
    Rank r(rank, tp, port);
    const auto model = f.build("GPT2LMHeadModel", &r.mesh);
    if (tp > 1) {
      EXPECT_TRUE(model->sharding().contains("lm_head.weight"));
    }
    expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    expect_loss_and_grads_match(f, *model, &r.mesh.tp());
    // Greedy generation through the vocab-parallel untied head (logits gathered to rank 0).
    expect_generations_match(*f.session({}, &r.mesh), f, rank);
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, Gpt2TensorParallel, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(Gpt2TensorParallelComm, OneForwardAllReducesTwicePerBlockPlusTheEmbedding) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto model = f.build("GPT2LMHeadModel", &r.mesh);
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

// parallel_output decides how the LM loss sees the logits: vocab-parallel cross-entropy on
// each rank's slice (no gather), or the gathered logits. Both equal HF's loss.
TEST(Gpt2TensorParallelComm, ParallelOutputKeepsTheLossFromGatheringLogits) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    for (const bool parallel_output : {true, false}) {
      const auto session =
          f.session({.shard = ShardConfig{.parallel_output = parallel_output}}, &r.mesh);
      r.mesh.tp().reset_stats();
      const at::Tensor loss = session->loss(f.forward_inputs(), f.ref("train_labels"));
      expect_close_to_hf(f, loss.reshape({1}), "train_loss", kOutputAtol, 0.0, "loss");
      EXPECT_EQ(r.mesh.tp().stats().all_gathers, parallel_output ? 0 : 1)
          << "parallel_output = " << parallel_output;
    }
  }));
}

// Dropout masks do not depend on the layout: at tp = 2 in training mode every rank ends with
// the logits a single rank computes under the same seed (attention heads split included).
TEST(Gpt2TensorParallelDropout, TrainingAtTp2EqualsTp1UnderTheSameSeed) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto sharded = f.build("GPT2LMHeadModel", &r.mesh);
    const auto whole = f.build("GPT2LMHeadModel");
    sharded->train();
    whole->train();
    const at::Tensor logits = f.forward(*sharded);  // [batch, seq, vocab], dropout active
    EXPECT_FALSE(at::allclose(logits, f.ref("forward_logits"), 1e-3, 1e-3)) << "no dropout";
    expect_close(logits, f.forward(*whole), kOutputAtol, 0.0, "tp 2 vs tp 1 in training");
  }));
}

TEST(Gpt2TensorParallelShardConfig, TensorParallelismDisabledKeepsWholeReplicas) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto model = f.build("GPT2LMHeadModel", &r.mesh,
                               {.shard = ShardConfig{.enable_tensor_parallelism = false}});
    EXPECT_TRUE(model->sharding().empty());
    r.mesh.tp().reset_stats();
    expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    EXPECT_EQ(r.mesh.tp().stats().all_reduces, 0);
    expect_loss_and_grads_match(f, *model, nullptr);
  }));
}

// The embedding split along its dimension (Embedding1D, with its tied head), and a vocabulary
// padded to another multiple, on the whole model.
TEST(Gpt2TensorParallelShardConfig, EmbeddingDimStyleAndOtherVocabMultiplesMatchHF) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    const auto dim_split =
        f.build("GPT2LMHeadModel", &r.mesh,
                {.overrides = Policy({{"wte", ShardStyle{.kind = ShardKind::kEmbeddingDim}}})});
    EXPECT_EQ(dim_split->sharding().at("transformer.wte.weight").dim, 1);
    expect_close(f.forward(*dim_split), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    expect_loss_and_grads_match(f, *dim_split, &r.mesh.tp());
    const auto padded = f.build("GPT2LMHeadModel", &r.mesh,
                                {.shard = ShardConfig{.make_vocab_size_divisible_by = 7}});
    EXPECT_EQ(padded->sharding().at("transformer.wte.weight").padded_size, 1022);  // 73 x 14
    expect_close(f.forward(*padded), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    expect_loss_and_grads_match(f, *padded, &r.mesh.tp());
  }));
}

TEST(Gpt2TensorParallelPolicy, JobOverrideKeepingTheMlpReplicatedStillMatchesHF) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Policy overrides(
        std::vector<PolicyRule>{{"h.*.mlp.c_fc", ShardStyle{}}, {"h.*.mlp.c_proj", ShardStyle{}}});
    Rank r(rank, 2, port);
    const auto model = f.build("GPT2LMHeadModel", &r.mesh, {.overrides = overrides});
    for (const auto& [name, shard] : model->sharding()) {
      EXPECT_EQ(name.find(".mlp."), std::string::npos) << name << " is split";
    }
    expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    expect_loss_and_grads_match(f, *model, &r.mesh.tp());
    // Greedy generation with the MLP kept whole.
    expect_generations_match(*f.session({.overrides = overrides}, &r.mesh), f, rank);
  }));
}

TEST(Gpt2TensorParallelPolicy, HalfSplitPairIsRefused) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 2, port);
    try {
      f.build("GPT2LMHeadModel", &r.mesh,
              {.overrides = Policy(std::vector<PolicyRule>{{"h.*.mlp.c_proj", ShardStyle{}}})});
      ADD_FAILURE() << "expected ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("must feed a row-parallel one"), std::string::npos)
          << e.what();
    }
  }));
}

TEST(Gpt2TensorParallelPolicy, HeadsNotDividingByTpAreRefusedBeforeLoading) {
  expect_all_ranks_passed(run_ranks(3, [&](int rank, int port) {
    const Gpt2Fixture f;
    Rank r(rank, 3, port);
    try {
      f.build("GPT2LMHeadModel", &r.mesh);
      ADD_FAILURE() << "expected ModelError";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("n_head = 4 does not divide by the tensor-parallel "
                                           "size 3"),
                std::string::npos)
          << e.what();
    }
  }));
}

// GPT-2 under pipeline parallelism (pp = 2, 3, 4, with tp = 2; Gloo, one process per rank)
// against HF transformers: logits, the LM loss, every parameter's gradient (the tied wte summed
// over the first and last stage; an untied head on the last only) and greedy generation, for
// GPipe, 1F1B and interleaved 1F1B, even and uneven layer splits; schedules agreeing with each
// other; a failing stage.
#include "gpt2_fixture.h"
#include "multiprocess.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/error.h"
#include "shardformer/pipeline/pipeline_generate.h"
#include "shardformer/pipeline/pipeline_runner.h"

#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <optional>
#include <set>
#include <thread>

using namespace shardformer;
using namespace shardformer::pipeline;
using shardformer::testing::expect_all_ranks_passed;
using shardformer::testing::expect_close;
using shardformer::testing::expect_close_to_hf;
using shardformer::testing::Gpt2Fixture;
using shardformer::testing::kGradAtol;
using shardformer::testing::kGradRtol;
using shardformer::testing::kOutputAtol;
using shardformer::testing::run_ranks;

namespace {

struct Layout {
  int pp = 2, tp = 1;
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int64_t chunks = 1, microbatches = 2;
  std::optional<std::vector<int64_t>> layers_per_piece = std::nullopt;
  std::string name = "";
  std::string model = "tiny-gpt2";

  PipelineLayout pipeline() const {
    return {.schedule = schedule,
            .num_microbatches = microbatches,
            .num_model_chunks = chunks,
            .layers_per_stage = layers_per_piece};
  }
};

void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

// One rank's view: its mesh and its session (the model of its stage), built as a job builds it.
struct PipelineRank {
  PipelineRank(int rank, const Layout& layout, int port, const Gpt2Fixture& f,
               std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : mesh(rank, {.pp = layout.pp, .tp = layout.tp},
             shardformer::testing::local_mesh_options(port, timeout)),
        session((at::set_num_threads(1), f.session({.pipeline = layout.pipeline()}, &mesh))),
        stages(*session->stages()),
        model(session->model_ptr()) {}
  distributed::ProcessMesh mesh;
  std::unique_ptr<Session> session;
  const PipelineStageManager& stages;
  std::shared_ptr<Model> model;
};

// The HF parameter names a stage must hold: embeddings on the first, ln_f and the head on the
// last (wte again when tied, else lm_head), and the blocks of its chunks.
std::set<std::string> expected_names(const Gpt2Fixture& f, const PipelineStageManager& stages) {
  std::vector<LayerRange> ranges;
  for (int64_t c = 0; c < stages.num_chunks(); ++c) ranges.push_back(stages.layers(c));
  std::set<std::string> names;
  for (const std::string& name : f.grad_names()) {
    const std::string block = "transformer.h.";
    if (name.starts_with(block)) {
      const int64_t layer = std::stoll(name.substr(block.size()));
      for (const LayerRange& r : ranges) {
        if (layer >= r.begin && layer < r.end) names.insert(name);
      }
    } else if (name.starts_with("transformer.wpe")) {
      if (stages.holds_first_piece()) names.insert(name);
    } else if (name.starts_with("transformer.ln_f")) {
      if (stages.holds_last_piece(stages.num_chunks() - 1)) names.insert(name);
    } else if (name == "transformer.wte.weight") {
      const bool tied = !f.reference.contains("grad.lm_head.weight");
      if (stages.holds_first_piece() ||
          (tied && stages.holds_last_piece(stages.num_chunks() - 1))) {
        names.insert(name);
      }
    } else if (name == "lm_head.weight") {
      if (stages.holds_last_piece(stages.num_chunks() - 1)) names.insert(name);
    } else {
      ADD_FAILURE() << "unexpected reference parameter " << name;
    }
  }
  return names;
}

class Gpt2Pipeline : public ::testing::TestWithParam<Layout> {};

}  // namespace

TEST_P(Gpt2Pipeline, LogitsLossGradientsAndGenerationMatchHF) {
  const Layout layout = GetParam();
  expect_all_ranks_passed(run_ranks(layout.pp * layout.tp, [&](int rank, int port) {
    const Gpt2Fixture f(layout.model);
    PipelineRank r(rank, layout, port, f);
    Session& session = *r.session;
    const bool last = r.stages.is_last_stage();
    EXPECT_EQ(session.pipeline_options(4).num_microbatches, layout.microbatches);

    const at::Tensor logits = session.forward(f.forward_inputs());
    EXPECT_EQ(logits.defined(), last);
    if (last) expect_close(logits, f.ref("forward_logits"), kOutputAtol, 0.0, "logits");
    const at::Tensor eval_loss = session.loss(f.forward_inputs(), f.ref("train_labels"));
    if (last) expect_close_to_hf(f, eval_loss.reshape({1}), "train_loss", kOutputAtol, 0.0, "loss");

    const at::Tensor loss = session.train_step(f.forward_inputs(), f.ref("train_labels"));
    EXPECT_EQ(loss.defined(), last);
    if (last) expect_close_to_hf(f, loss.reshape({1}), "train_loss", kOutputAtol, 0.0, "loss");
    const auto grads = gather_parameters(session.model(), &r.mesh.tp(), /*grads=*/true);
    std::set<std::string> held;
    for (const auto& [name, grad] : grads) {
      held.insert(name);
      expect_close_to_hf(f, grad, "grad." + name, kGradAtol, kGradRtol, "grad of " + name);
    }
    EXPECT_EQ(held, expected_names(f, r.stages)) << "stage " << r.stages.stage();

    const GenerationResult eos = session.generate(f.prompts(), f.generation_config(true));
    EXPECT_TRUE(at::equal(eos.sequences, f.ref("generate_eos_sequences"))) << eos.sequences;
    const GenerationResult full = session.generate(f.prompts(), f.generation_config(false));
    EXPECT_TRUE(at::equal(full.sequences, f.ref("generate_sequences"))) << full.sequences;
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Gpt2Pipeline,
    ::testing::Values(
        Layout{.pp = 2, .microbatches = 2, .name = "pp2_1f1b_m2"},
        Layout{
            .pp = 2, .schedule = ScheduleKind::kGPipe, .microbatches = 4, .name = "pp2_gpipe_m4"},
        Layout{.pp = 2,
               .schedule = ScheduleKind::kInterleaved,
               .chunks = 2,
               .microbatches = 4,
               .name = "pp2_interleaved_v2_m4"},
        Layout{.pp = 2,
               .microbatches = 4,
               .layers_per_piece = std::vector<int64_t>{5, 3},
               .name = "pp2_1f1b_layers5and3"},
        Layout{.pp = 3, .microbatches = 3, .name = "pp3_1f1b_m3_uneven"},
        Layout{.pp = 4, .microbatches = 4, .name = "pp4_1f1b_m4"},
        Layout{.pp = 4,
               .schedule = ScheduleKind::kGPipe,
               .microbatches = 3,
               .name = "pp4_gpipe_m3_uneven_microbatches"},
        Layout{.pp = 4,
               .schedule = ScheduleKind::kInterleaved,
               .chunks = 2,
               .microbatches = 4,
               .name = "pp4_interleaved_v2_m4"},
        Layout{.pp = 2, .tp = 2, .microbatches = 2, .name = "pp2_tp2_1f1b_m2"},
        Layout{.pp = 2,
               .tp = 2,
               .schedule = ScheduleKind::kInterleaved,
               .chunks = 2,
               .microbatches = 2,
               .name = "pp2_tp2_interleaved_v2_m2"},
        Layout{
            .pp = 2, .microbatches = 2, .name = "untied_pp2_1f1b_m2", .model = "tiny-gpt2-untied"},
        Layout{.pp = 2,
               .tp = 2,
               .microbatches = 2,
               .name = "untied_pp2_tp2_1f1b_m2",
               .model = "tiny-gpt2-untied"}),
    [](const auto& info) { return info.param.name; });

// GPipe and 1F1B on the same split accumulate the micro-batches in the same order, so their
// gradients are bitwise equal; interleaved (another split) agrees to rounding. Every stage
// compares the whole model's gradients, assembled over the pp group.
TEST(Gpt2PipelineSchedules, GiveTheSameGradients) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    at::set_num_threads(1);
    distributed::ProcessMesh mesh(rank, {.pp = 2}, shardformer::testing::local_mesh_options(port));
    const auto all_grads = [&](ScheduleKind kind, int64_t chunks) {
      const auto model = f.build(
          "GPT2LMHeadModel", &mesh,
          {.pipeline = {.schedule = kind, .num_microbatches = 4, .num_model_chunks = chunks}});
      PipelineRunner runner(*model, mesh.pp(), {.schedule = kind, .num_microbatches = 4});
      runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      const auto held = gather_parameters(*model, nullptr, /*grads=*/true);
      std::map<std::string, at::Tensor> whole;  // held ones summed, divided by their holders
      for (const std::string& name : f.grad_names()) {
        const auto found = held.find(name);
        at::Tensor grad = found != held.end() ? found->second.clone()
                                              : at::zeros_like(f.ref("grad." + name), at::kFloat);
        at::Tensor holders = at::full({1}, found != held.end() ? 1.0 : 0.0);
        mesh.pp().all_reduce_(grad);
        mesh.pp().all_reduce_(holders);
        whole[name] = grad / holders;
      }
      return whole;
    };
    const auto gpipe = all_grads(ScheduleKind::kGPipe, 1);
    const auto one_f_one_b = all_grads(ScheduleKind::kOneFOneB, 1);
    const auto interleaved = all_grads(ScheduleKind::kInterleaved, 2);
    for (const auto& [name, grad] : gpipe) {
      EXPECT_TRUE(at::equal(grad, one_f_one_b.at(name))) << name << ": gpipe != 1f1b";
      expect_close(interleaved.at(name), grad, 1e-7, 1e-5, name + ": interleaved vs gpipe");
    }
  }));
}

// Two steps without zeroing accumulate twice HF's gradients everywhere, the tied wte included:
// each step exchanges only its own part of a shared gradient.
TEST(Gpt2PipelineTraining, StepsWithoutZeroingAccumulateLikeAutograd) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    PipelineRank r(rank, Layout{.pp = 2, .microbatches = 2}, port, f);
    const auto& model = r.model;
    PipelineRunner runner(*model, r.mesh.pp(), {.num_microbatches = 2});
    runner.train_step(f.forward_inputs(), f.ref("train_labels"));
    runner.train_step(f.forward_inputs(), f.ref("train_labels"));
    for (const auto& [name, grad] : gather_parameters(*model, nullptr, /*grads=*/true)) {
      // Halving is exact in fp32: twice HF's gradient within twice the tolerance.
      expect_close_to_hf(f, grad / 2, "grad." + name, kGradAtol, kGradRtol,
                         "half the twice-accumulated grad of " + name);
    }
  }));
}

// Training through the pipeline with an optimizer: the tied wte, updated on the first and the
// last stage from the same summed gradient, stays bitwise identical, and the loss before each
// SGD step follows HF's (one tied parameter there).
TEST(Gpt2PipelineTraining, SgdStepsFollowHFAndKeepTheTiedWeightIdentical) {
  expect_all_ranks_passed(run_ranks(4, [&](int rank, int port) {
    const Gpt2Fixture f;
    PipelineRank r(rank, Layout{.pp = 2, .tp = 2, .microbatches = 2}, port, f);
    const auto& model = r.model;
    PipelineRunner runner(*model, r.mesh.pp(), {.num_microbatches = 2});
    torch::optim::SGD sgd(model->parameters(),
                          torch::optim::SGDOptions(f.ref("sgd_lr").item<double>()));
    const at::Tensor expected = f.ref("sgd_losses");  // [steps]
    for (int64_t step = 0; step < expected.size(0); ++step) {
      sgd.zero_grad();
      const at::Tensor loss = runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      sgd.step();
      if (r.stages.is_last_stage()) {
        expect_close(loss.reshape({1}), expected[step].reshape({1}), kOutputAtol, 0.0,
                     "loss before step " + std::to_string(step));
      }
    }
    at::Tensor wte = model->named_parameters()["transformer.wte.weight"].detach();
    if (r.stages.is_first_stage()) {
      r.mesh.pp().send(wte, 1);
    } else {
      at::Tensor first = at::empty_like(wte);
      r.mesh.pp().recv_(first, 0);
      EXPECT_TRUE(at::equal(first, wte)) << "the stages' copies of wte diverged";
    }
  }));
}

// A stage that fails mid-run ends its peers' step with an error within seconds, not a hang.
TEST(Gpt2PipelineFailure, AStageThatDiesFailsItsPeerQuickly) {
  const Layout layout{.pp = 2, .microbatches = 4};
  const auto statuses = run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    PipelineRank r(rank, layout, port, f);
    const auto& model = r.model;
    PipelineRunner runner(*model, r.mesh.pp(), {.num_microbatches = layout.microbatches});
    if (rank == 1) throw Error("stage 1 fails on purpose");
    const auto start = std::chrono::steady_clock::now();
    try {
      runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      ADD_FAILURE() << "stage 0 finished a step without stage 1";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("group 'pp'"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0) << "stage 0";
  EXPECT_TRUE(WIFEXITED(statuses[1]) && WEXITSTATUS(statuses[1]) == 1) << "stage 1";
}

// A stage that stalls (alive, connections open, sending nothing) fails its peer's receive
// after the mesh timeout instead of hanging it.
TEST(Gpt2PipelineFailure, AStallingStageTimesOutItsPeer) {
  const Layout layout{.pp = 2, .microbatches = 2};
  const auto timeout = std::chrono::seconds(2);
  const auto statuses = run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    PipelineRank r(rank, layout, port, f, timeout);
    const auto& model = r.model;
    PipelineRunner runner(*model, r.mesh.pp(), {.num_microbatches = layout.microbatches});
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(5));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      ADD_FAILURE() << "stage 0 finished a step without stage 1";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("on group 'pp' failed"), std::string::npos) << e.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, timeout);
    EXPECT_LT(waited, std::chrono::seconds(6));
    std::_Exit(::testing::Test::HasFailure() ? 1 : 0);  // no teardown barrier with stage 1
  });
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_TRUE(WIFEXITED(statuses[0]) && WEXITSTATUS(statuses[0]) == 0) << "stage 0";
}

// Shapes and dtypes cross once per micro-batch input shape, not with every tensor: four
// micro-batches of one row share one key each way, three (2 + 1 + 1 rows) have two, and a
// second step sends none.
TEST(Gpt2PipelineChannel, SendsShapesOncePerInputShape) {
  for (const int64_t microbatches : {4, 3}) {
    expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
      const Gpt2Fixture f;
      const Layout layout{.pp = 2, .microbatches = microbatches};
      PipelineRank r(rank, layout, port, f);
      const auto& model = r.model;
      PipelineRunner runner(*model, r.mesh.pp(), {.num_microbatches = microbatches});
      const int64_t keys = microbatches == 4 ? 1 : 2;
      for (int step = 0; step < 2; ++step) {
        runner.train_step(f.forward_inputs(), f.ref("train_labels"));
        EXPECT_EQ(runner.channel().metadata_sent(), keys) << "step " << step;
        EXPECT_EQ(runner.channel().metadata_received(), keys) << "step " << step;
      }
      r.mesh.pp().reset_stats();
      runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      // Per micro-batch one activation or gradient each way, plus the tied wte's gradient.
      EXPECT_EQ(r.mesh.pp().stats().sends, microbatches + 1);
    }));
  }
}

// What 1F1B buys over GPipe: a stage keeps at most (stages - stage) micro-batches' activations
// alive, where GPipe keeps all of them until the backward passes start.
TEST(Gpt2PipelineMemory, OneFOneBBoundsTheLiveMicroBatches) {
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    const Gpt2Fixture f;
    PipelineRank r(rank, Layout{.pp = 2, .microbatches = 4}, port, f);
    const auto& model = r.model;
    const int64_t stage = r.stages.stage();
    for (const auto& [kind, expected] : {std::pair{ScheduleKind::kGPipe, int64_t{4}},
                                         std::pair{ScheduleKind::kOneFOneB, 2 - stage}}) {
      PipelineRunner runner(*model, r.mesh.pp(), {.schedule = kind, .num_microbatches = 4});
      runner.train_step(f.forward_inputs(), f.ref("train_labels"));
      EXPECT_EQ(runner.stats().max_live_microbatches, expected)
          << schedule_name(kind) << " stage " << stage;
    }
  }));
}

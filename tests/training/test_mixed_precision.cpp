// Mixed-precision training: bf16 and fp16 with fp32 master weights follow torch's fp32 curve
// over 100 steps (tools/train_reference.py --steps 100), GPT-2's and T5's; fp16's dynamic loss
// scale skips the steps that overflow, as GradScaler does, and resumes bit for bit.
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "training_fixture.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <cmath>
#include <cstdio>

namespace shardformer::testing {
namespace {

namespace fs = std::filesystem;
using training::LossScaleOptions;
using training::LossScaler;
using training::Precision;
using training::StepMetrics;
using training::Trainer;

constexpr int64_t kCurveSteps = 100;
#ifdef SHARDFORMER_SANITIZE
// Under the sanitizers the curves run their first ten steps only, against the same reference and
// schedule: every memory path of a step is taken by then, and a 100-step curve there took about
// 40 s a rank (ASan's allocator on torch's per-op allocations). The normal suite checks all 100
// steps, the last ten's mean and what the run learns.
constexpr int64_t kStepsRun = 10;
#else
constexpr int64_t kStepsRun = kCurveSteps;
#endif

SafetensorsFile curve_reference() {
  return SafetensorsFile(test_data_dir() / "training-100" / "reference.safetensors");
}

training::TrainOptions mixed_options(int64_t steps, Precision precision, int zero_stage = 0) {
  training::TrainOptions options = reference_train_options(steps, zero_stage);
  options.precision = precision;
  return options;
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterAnInterval) {
  LossScaler scaler({.initial_scale = 1024, .growth_interval = 3, .min_scale = 256}, true);
  EXPECT_FALSE(scaler.update(false));  // overflow: skipped, halved
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_TRUE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 512);
  EXPECT_TRUE(scaler.update(true));  // the third finite step in a row doubles it
  EXPECT_EQ(scaler.scale(), 1024);
  EXPECT_EQ(scaler.good_steps(), 0);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_FALSE(scaler.update(false));  // an overflow restarts the count
  EXPECT_EQ(scaler.good_steps(), 0);
  EXPECT_FALSE(scaler.update(false));
  EXPECT_FALSE(scaler.update(false));  // never below min_scale
  EXPECT_EQ(scaler.scale(), 256);
  EXPECT_EQ(scaler.skipped_steps(), 4);

  LossScaler off({}, false);
  EXPECT_EQ(off.scale(), 1);
  EXPECT_FALSE(off.update(false));
  EXPECT_EQ(off.skipped_steps(), 0);
}

TEST(Precision, ParsesItsNames) {
  EXPECT_EQ(training::parse_precision("bf16"), Precision::kBFloat16);
  EXPECT_EQ(training::compute_dtype(Precision::kFloat16), at::kHalf);
  EXPECT_STREQ(training::precision_name(Precision::kFloat32), "fp32");
  EXPECT_THROW(training::parse_precision("float16"), ConfigError);
}

struct CurveCase {
  TrainLayout layout;
  Precision precision;
  // The largest |loss - torch fp32 loss| allowed at any of the 100 steps, and over the mean of
  // the last ten (measured: docs/training.md).
  double step_atol, tail_atol;
};

void PrintTo(const CurveCase& c, std::ostream* os) { *os << c.layout.name; }

class MixedPrecisionCurve : public ::testing::TestWithParam<CurveCase> {};

// Runs the curve's steps in `c.precision` and checks each loss against torch's fp32 `losses`;
// the run must learn at least `learns` nats between the first step and the last ten (when it runs
// all of them: kStepsRun).
void expect_curve(const Session& session, Trainer& trainer, const at::Tensor& losses,
                  const CurveCase& c, int rank, double learns) {
  for (const auto& p : session.model().parameters()) {
    ASSERT_EQ(p.scalar_type(), training::compute_dtype(c.precision));
  }
  double worst = 0, tail = 0;
  int64_t skipped = 0;
  for (int64_t s = 0; s < kStepsRun; ++s) {
    const StepMetrics m = trainer.step();
    const double diff = m.loss - losses[s].item<double>();
    EXPECT_LE(std::abs(diff), c.step_atol) << c.layout.name << ", step " << s;
    worst = std::max(worst, std::abs(diff));
    if (s >= kCurveSteps - 10) tail += diff / 10;
    skipped += m.skipped ? 1 : 0;
  }
  EXPECT_EQ(skipped, 0) << c.layout.name;
  if (kStepsRun == kCurveSteps) {
    EXPECT_LE(std::abs(tail), c.tail_atol) << c.layout.name;
    EXPECT_LT(tail + losses.narrow(0, kCurveSteps - 10, 10).mean().item<double>(),
              losses[0].item<double>() - learns);
  }
  if (rank == 0) {
    std::printf("%s: max |loss - torch fp32| over %lld steps = %.3g, last-10 mean %.3g\n",
                c.layout.name.c_str(), static_cast<long long>(kStepsRun), worst, tail);
  }
}

TEST_P(MixedPrecisionCurve, FollowsTheFloat32Curve) {
  const CurveCase c = GetParam();
  on_training_ranks(c.layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh,
                                  int rank) {
    const auto session = training_session(f, mesh, f.checkpoint.directory());
    const training::TokenDataset data(reference_data_options(), 1013);
    Trainer trainer(*session, data, mixed_options(kCurveSteps, c.precision, c.layout.zero_stage));
    expect_curve(*session, trainer, curve_reference().read("losses"), c, rank, 1.0);
  });
}

// T5 on source / target pairs (tools/train_reference.py --model tiny-t5 --seq2seq --steps 100):
// both stacks in bf16 over a pipeline and tp, and in fp16 with its loss scale.
class Seq2SeqMixedPrecisionCurve : public ::testing::TestWithParam<CurveCase> {};

TEST_P(Seq2SeqMixedPrecisionCurve, FollowsTheFloat32Curve) {
  const CurveCase c = GetParam();
  const fs::path dir = test_data_dir() / "training-families" / "tiny-t5-s2s-100";
  expect_all_ranks_passed(run_ranks(static_cast<int>(c.layout.world()), [&](int rank, int port) {
    at::set_num_threads(1);
    const ModelFixture f("tiny-t5", ModelFixture::ReferenceFile{dir / "reference.safetensors"});
    std::unique_ptr<distributed::ProcessMesh> mesh;
    if (c.layout.world() > 1) {
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank, distributed::MeshShape{.dp = c.layout.dp, .pp = c.layout.pp, .tp = c.layout.tp},
          local_mesh_options(port));
    }
    SessionOptions options{.checkpoint = dir / "model"};
    if (c.layout.pp > 1) options.pipeline.num_microbatches = 4;
    const auto session = f.session(options, mesh.get());
    training::DataOptions data_options = reference_data_options();
    data_options.path = dir / "train_s2s.jsonl";
    const training::TokenDataset data(data_options, 1013);
    Trainer trainer(*session, data, mixed_options(kCurveSteps, c.precision, c.layout.zero_stage));
    expect_curve(*session, trainer, f.reference.read("losses"), c, rank, 0.5);
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Precisions, Seq2SeqMixedPrecisionCurve,
    ::testing::Values(CurveCase{TrainLayout{.pp = 2, .tp = 2, .name = "t5_bf16_pp2_tp2"},
                                Precision::kBFloat16, 2e-2, 2e-3},
                      CurveCase{TrainLayout{.name = "t5_fp16"}, Precision::kFloat16, 1e-2, 5e-4}),
    [](const auto& info) { return info.param.layout.name; });

INSTANTIATE_TEST_SUITE_P(
    Precisions, MixedPrecisionCurve,
    ::testing::Values(CurveCase{TrainLayout{.name = "bf16"}, Precision::kBFloat16, 1e-2, 2e-3},
                      CurveCase{TrainLayout{.dp = 2, .zero_stage = 1, .name = "bf16_dp2_zero1"},
                                Precision::kBFloat16, 1e-2, 2e-3},
                      CurveCase{TrainLayout{.pp = 2, .tp = 2, .name = "bf16_pp2_tp2"},
                                Precision::kBFloat16, 1e-2, 2e-3},
                      CurveCase{TrainLayout{.name = "fp16"}, Precision::kFloat16, 2e-3, 5e-4},
                      CurveCase{TrainLayout{.dp = 2, .zero_stage = 1, .name = "fp16_dp2_zero1"},
                                Precision::kFloat16, 2e-3, 5e-4}),
    [](const auto& info) { return info.param.layout.name; });

// A loss scale far too large: every step overflows fp16 and is skipped (the weights stay as they
// were, the scale halves) until the scale fits; then steps apply and the scale grows again
// after growth_interval finite steps.
TEST(LossScaling, SkipsOverflowingStepsAndRecovers) {
  on_training_ranks(
      TrainLayout{.dp = 2}, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session = training_session(f, mesh, f.checkpoint.directory());
        const training::TokenDataset data(reference_data_options(), 1013);
        training::TrainOptions options = mixed_options(kCurveSteps, Precision::kFloat16);
        options.loss_scale = {.initial_scale = std::ldexp(1.0, 40), .growth_interval = 4};
        Trainer trainer(*session, data, options);
        const at::Tensor before = session->model().parameters()[0].detach().clone();
        std::vector<StepMetrics> steps;
        while (steps.empty() || steps.back().skipped) {
          steps.push_back(trainer.step());
          ASSERT_LT(steps.size(), 40u) << "the scale never came down";
          if (steps.back().skipped) {
            EXPECT_TRUE(at::equal(session->model().parameters()[0], before));
            EXPECT_FALSE(std::isfinite(steps.back().grad_norm));
          }
        }
        ASSERT_GE(steps.size(), 2u) << "2^40 did not overflow fp16";
        for (size_t s = 1; s < steps.size(); ++s) {
          EXPECT_EQ(steps[s].loss_scale, steps[s - 1].loss_scale / 2) << "step " << s;
        }
        EXPECT_FALSE(at::equal(session->model().parameters()[0], before));
        const double fitted = steps.back().loss_scale;
        const size_t skipped = steps.size() - 1;
        for (int s = 0; s < 3; ++s) {  // finite steps two to four run at the fitted scale
          steps.push_back(trainer.step());
          EXPECT_EQ(steps.back().loss_scale, fitted) << "grew before four finite steps";
        }
        steps.push_back(trainer.step());
        EXPECT_EQ(steps.back().loss_scale, 2 * fitted);
        std::printf("fp16 from 2^40: %zu steps skipped, scale settled at 2^%.0f\n", skipped,
                    std::log2(fitted));
      });
}

// Five fp16 steps, a save, five more from it: bitwise the ten straight ones, loss scale and
// master weights included (the scale starts high so that it changes on the way).
TEST(LossScaling, ResumesBitForBit) {
  const fs::path dir = fs::temp_directory_path() / str("shardformer-fp16-resume-", getpid());
  fs::remove_all(dir);
  on_training_ranks(
      TrainLayout{}, [&](const ModelFixture& f, const distributed::ProcessMesh*, int) {
        const training::TokenDataset data(reference_data_options(), 1013);
        training::TrainOptions options = mixed_options(10, Precision::kFloat16);
        options.loss_scale = {.initial_scale = std::ldexp(1.0, 22), .growth_interval = 2};
        std::vector<StepMetrics> straight, resumed;
        {
          const auto session = training_session(f, nullptr, f.checkpoint.directory());
          Trainer trainer(*session, data, options);
          for (int s = 0; s < 10; ++s) straight.push_back(trainer.step());
        }
        {
          const auto session = training_session(f, nullptr, f.checkpoint.directory());
          Trainer trainer(*session, data, options);
          for (int s = 0; s < 5; ++s) resumed.push_back(trainer.step());
          trainer.save(dir);
        }
        const auto session = training_session(f, nullptr, dir);
        Trainer trainer(*session, data, options);
        trainer.load(dir);
        for (int s = 0; s < 5; ++s) resumed.push_back(trainer.step());
        int64_t skipped = 0;
        for (size_t s = 0; s < straight.size(); ++s) {
          EXPECT_EQ(resumed[s].loss, straight[s].loss) << "step " << s;
          EXPECT_EQ(resumed[s].loss_scale, straight[s].loss_scale) << "step " << s;
          EXPECT_EQ(resumed[s].skipped, straight[s].skipped) << "step " << s;
          skipped += straight[s].skipped ? 1 : 0;
        }
        EXPECT_GT(skipped, 0) << "2^22 should overflow fp16 at first";
      });
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shardformer::testing

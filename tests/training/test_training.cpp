// Training at every dp x pp x tp layout against HF GPT-2 with torch.optim.AdamW
// (tools/train_reference.py): the sample order, each step's loss, gradient norm and learning
// rate, the final weights; saves HF reads back, and resumes at the same or another layout.
#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/vision/image_processor.h"
#include "training_fixture.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

namespace shardformer::testing {
namespace {

namespace fs = std::filesystem;
using training::SampleStream;
using training::StepMetrics;
using training::Trainer;

constexpr int64_t kSteps = 20;
// Over 20 AdamW steps fp32 summation-order differences between layouts grow; the losses stay
// within these of torch's (measured: docs/training.md).
constexpr double kLossAtol = 1e-5, kNormRtol = 1e-4, kWeightAtol = 1e-5;

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(SampleStream, IsTheReferencePermutationPerEpoch) {
  const SafetensorsFile ref = training_reference();
  EXPECT_EQ(SampleStream::permutation(512, 1234, 0), as_vector(ref.read("permutation_epoch0")));
  EXPECT_EQ(SampleStream::permutation(512, 1234, 1), as_vector(ref.read("permutation_epoch1")));
  SampleStream stream(512, 1234, /*shuffle=*/true);
  const at::Tensor order = ref.read("sample_order");  // [steps, 8]
  for (int64_t step = 0; step < order.size(0); ++step) {
    EXPECT_EQ(stream.next(8), as_vector(order[step])) << "step " << step;
  }
}

TEST(SampleStream, CrossesEpochsAndSeeks) {
  SampleStream stream(10, 7, true);
  std::vector<int64_t> first = stream.next(25);  // two epochs and a half
  const auto epoch0 = SampleStream::permutation(10, 7, 0);
  const auto epoch1 = SampleStream::permutation(10, 7, 1);
  EXPECT_EQ(std::vector<int64_t>(first.begin(), first.begin() + 10), epoch0);
  EXPECT_EQ(std::vector<int64_t>(first.begin() + 10, first.begin() + 20), epoch1);
  EXPECT_NE(epoch0, epoch1);
  SampleStream resumed(10, 7, true);
  resumed.seek(13);
  EXPECT_EQ(resumed.next(12), std::vector<int64_t>(first.begin() + 13, first.begin() + 25));
  SampleStream ordered(4, 7, /*shuffle=*/false);
  EXPECT_EQ(ordered.next(6), (std::vector<int64_t>{0, 1, 2, 3, 0, 1}));
}

// A folder for a test's checkpoints, made before the ranks fork so they share it.
fs::path scratch_dir(const std::string& name) {
  std::string pattern = (fs::temp_directory_path() / ("shardformer-" + name + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern;
  return pattern;
}

// Runs `count` steps and checks each against the reference's step.
// causal: every sample's 31 next-token labels count (masked-LM steps count their masks).
std::vector<StepMetrics> run_and_check(Trainer& trainer, const SafetensorsFile& ref, int64_t count,
                                       const std::string& what, bool causal = true) {
  const at::Tensor losses = ref.read("losses"), norms = ref.read("grad_norms"),
                   lrs = ref.read("lrs");
  std::vector<StepMetrics> steps;
  double worst = 0;
  for (int64_t i = 0; i < count; ++i) {
    const StepMetrics m = trainer.step();
    const int64_t s = m.step - 1;
    EXPECT_NEAR(m.loss, losses[s].item<double>(), kLossAtol) << what << ", loss of step " << s;
    worst = std::max(worst, std::abs(m.loss - losses[s].item<double>()));
    const double norm = norms[s].item<double>();
    EXPECT_NEAR(m.grad_norm, norm, kNormRtol * norm) << what << ", grad norm of step " << s;
    EXPECT_NEAR(m.lr, lrs[s].item<double>(), 1e-15) << what << ", lr of step " << s;
    if (causal) {
      EXPECT_EQ(m.tokens, 8 * 31) << what;
    }
    steps.push_back(m);
  }
  std::printf("%s: max |loss - torch| over %lld steps = %.3g\n", what.c_str(),
              static_cast<long long>(count), worst);
  return steps;
}

// The key projection's bias has no effect on attention (softmax is shift-invariant), so its
// gradient is rounding noise (~1e-10) that Adam's normalisation turns into steps of about lr in
// a direction no two summation orders agree on. It is left out of weight comparisons; its
// moments (~1e-10) still compare.
at::Tensor without_key_bias(const std::string& name, const at::Tensor& weight) {
  if (!name.ends_with("attn.c_attn.bias")) return weight;
  const int64_t h = weight.size(0) / 3;  // [3 hidden]: query, key, value
  return at::cat({weight.narrow(0, 0, h), weight.narrow(0, 2 * h, h)});
}

// The weights (gathered over tp; a pipeline stage has some) and, when `moments`, the AdamW
// moments of the parameters this rank updates, against the reference's after its last step.
void expect_final_state(const Session& session, const Trainer& trainer,
                        const distributed::ProcessMesh* mesh, const SafetensorsFile& ref) {
  const auto weights = gather_parameters(session.model(), mesh ? &mesh->tp() : nullptr, false);
  ASSERT_FALSE(weights.empty());
  for (const auto& [name, weight] : weights) {
    expect_close(without_key_bias(name, weight),
                 without_key_bias(name, ref.read("weights." + name)), kWeightAtol, 0.0,
                 "weight " + name);
  }
  if (mesh != nullptr && mesh->shape().tp > 1) return;  // moments are checked in saved form
  for (const auto& p : trainer.optimizer().params()) {
    const auto [exp_avg, exp_avg_sq] = trainer.optimizer().moments(p.name);
    expect_close(exp_avg, ref.read("adam.exp_avg." + p.name), 1e-6, 1e-3, "exp_avg " + p.name);
    expect_close(exp_avg_sq, ref.read("adam.exp_avg_sq." + p.name), 1e-9, 1e-3,
                 "exp_avg_sq " + p.name);
  }
}

class TrainingLayouts : public ::testing::TestWithParam<TrainLayout> {};

TEST_P(TrainingLayouts, MatchesTorchAdamWStepByStep) {
  const TrainLayout layout = GetParam();
  on_training_ranks(layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    const auto session = training_session(f, mesh, f.checkpoint.directory(), layout);
    const training::TokenDataset data(reference_data_options(), 1013);
    training::TrainOptions options = reference_train_options(kSteps, layout.zero_stage);
    options.recompute = layout.recompute;
    Trainer trainer(*session, data, options);
    run_and_check(trainer, f.reference, kSteps, layout.name);
    expect_final_state(*session, trainer, mesh, f.reference);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TrainingLayouts,
    ::testing::Values(
        TrainLayout{.name = "single"}, TrainLayout{.tp = 2, .name = "tp2"},
        TrainLayout{.pp = 2, .name = "pp2"}, TrainLayout{.dp = 2, .name = "dp2"},
        TrainLayout{.dp = 2, .zero_stage = 1, .name = "dp2_zero1"},
        TrainLayout{.pp = 2, .tp = 2, .name = "pp2_tp2"},
        TrainLayout{.dp = 2, .tp = 2, .name = "dp2_tp2"},
        TrainLayout{.dp = 2, .pp = 2, .zero_stage = 1, .name = "dp2_pp2_zero1"},
        // activation checkpointing: every layer, half of them, 1 and 3 of 4
        TrainLayout{.name = "recompute_all", .recompute = {.ratio = 1.0}},
        TrainLayout{.dp = 2,
                    .zero_stage = 1,
                    .name = "dp2_zero1_recompute_half",
                    .recompute = {.ratio = 0.5}},
        TrainLayout{.pp = 2,
                    .tp = 2,
                    .name = "pp2_tp2_recompute_1_3",
                    .recompute = {.layers_per_stage = {1, 3}}},
        // sequence parallelism: the trainer sums the layers' partial gradients
        TrainLayout{.tp = 2,
                    .name = "sg_overlap_tp2",
                    .sequence_mode = "split_gather",
                    .sequence_overlap = true},
        TrainLayout{.dp = 2,
                    .tp = 2,
                    .zero_stage = 1,
                    .name = "dp2_sg_tp2_zero1",
                    .sequence_mode = "split_gather"},
        TrainLayout{.tp = 2, .name = "a2a_sp2_tp2", .sp = 2, .sequence_mode = "all_to_all"},
        TrainLayout{.name = "ring_sp2", .sp = 2, .sequence_mode = "ring_attn"},
        TrainLayout{.pp = 2, .name = "ring_sp2_pp2", .sp = 2, .sequence_mode = "ring_attn"}),
    [](const auto& info) { return info.param.name; });

// Every causal-LM family trains through the same trainer: 20 steps of each family's tiny
// checkpoint (dropout off) at dp 2 x tp 2 with ZeRO-1 and at pp 2 equal HF +
// torch.optim.AdamW's (tools/train_reference.py --model).
// BERT's masked-LM head as well ("tiny-bert-mlm": 15 % of the positions masked, the same static
// masks on both sides, each micro-batch weighted by its masked tokens) and its classification
// head ("tiny-bert-cls": JSON lines labelled sum(ids) % 2), and T5 on source / target pairs
// ("tiny-t5-s2s": JSON lines of ids, sources and targets of different lengths).
class FamilyTraining : public ::testing::TestWithParam<std::tuple<std::string, TrainLayout>> {};

// The data of a family's reference run: its data file, masks for "-mlm".
training::DataOptions family_data_options(const std::string& name, const fs::path& dir) {
  training::DataOptions options = reference_data_options();
  if (name.ends_with("-mlm")) {
    options.mlm_probability = 0.15;
    options.mask_token_id = 4;
  }
  if (name.ends_with("-cls")) options.path = dir / "train_cls.jsonl";
  if (name.ends_with("-s2s")) options.path = dir / "train_s2s.jsonl";
  return options;
}

// "tiny-bert-mlm" trains "tiny-bert": a suffix names the head and data, not the checkpoint.
std::string family_model(const std::string& name) {
  const bool head = name.ends_with("-mlm") || name.ends_with("-cls") || name.ends_with("-s2s");
  return head ? name.substr(0, name.size() - 4) : name;
}

// What a family's training run reads: causal-LM data (every step counts 8 x 31 labels), or
// labelled images (the model folder's image processor prepares them; 8 a step).
enum class FamilyData { kCausal, kOther, kImages };

// Trains `model`'s dropout-free copy in `dir` (its reference run's folder) at `layout` for the
// reference's 20 steps on `data_options` and checks every step against the reference.
void train_and_check(const std::string& model, const fs::path& dir, const TrainLayout& layout,
                     const training::DataOptions& data_options, FamilyData kind,
                     const std::string& what) {
  const bool images = kind == FamilyData::kImages;
  expect_all_ranks_passed(run_ranks(static_cast<int>(layout.world()), [&](int rank, int port) {
    at::set_num_threads(1);
    const ModelFixture f(model, ModelFixture::ReferenceFile{dir / "reference.safetensors"});
    const distributed::ProcessMesh mesh(
        rank, distributed::MeshShape{.dp = layout.dp, .pp = layout.pp, .tp = layout.tp},
        local_mesh_options(port));
    SessionOptions options{.checkpoint = dir / "model"};
    if (layout.pp > 1) {
      options.pipeline.num_microbatches = static_cast<int>(4 / layout.dp);
      options.pipeline.schedule = layout.schedule;
    }
    const auto session = f.session(options, &mesh);
    std::optional<training::ImageClasses> classes;
    if (images) {
      classes = training::ImageClasses{
          .processor = vision::ImageProcessorOptions::from_folder(dir / "model")};
      const std::optional<HFConfig> id2label =
          session->checkpoint().config().get_object("id2label");
      ASSERT_TRUE(id2label.has_value());
      for (size_t i = 0; i < id2label->keys().size(); ++i) {
        classes->names.push_back(id2label->get_string(std::to_string(i)));
      }
    }
    const training::TokenDataset data(data_options, 1013, nullptr, classes ? &*classes : nullptr);
    training::TrainOptions train = reference_train_options(kSteps, layout.zero_stage);
    train.recompute = layout.recompute;
    Trainer trainer(*session, data, train);
    const std::vector<StepMetrics> steps =
        run_and_check(trainer, f.reference, kSteps, what, kind == FamilyData::kCausal);
    if (images) {
      for (const StepMetrics& m : steps) EXPECT_EQ(m.tokens, 8) << what << ": images a step";
    }
  }));
}

TEST_P(FamilyTraining, MatchesTorchAdamWStepByStep) {
  const auto& [name, layout] = GetParam();
  const fs::path dir = test_data_dir() / "training-families" / name;  // dropout-free copy
  const std::string model = family_model(name);
  train_and_check(model, dir, layout, family_data_options(name, dir),
                  model == name ? FamilyData::kCausal : FamilyData::kOther,
                  name + " " + layout.name);
}

INSTANTIATE_TEST_SUITE_P(
    Families, FamilyTraining,
    ::testing::Combine(
        ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-opt", "tiny-bloom", "tiny-bert-mlm",
                          "tiny-bert-cls", "tiny-t5-s2s"),
        ::testing::Values(TrainLayout{.dp = 2, .tp = 2, .zero_stage = 1, .name = "dp2_tp2_zero1"},
                          TrainLayout{.pp = 2, .name = "pp2"})),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param).name;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// The encoder-decoder pipeline trains too: T5's stages split between the encoder and the
// decoder, tp 2 within each, every layer recomputed in the backward pass; and under GPipe
// (every micro-batch's forward before the first backward) as under 1F1B.
INSTANTIATE_TEST_SUITE_P(
    Seq2Seq, FamilyTraining,
    ::testing::Combine(
        ::testing::Values("tiny-t5-s2s"),
        ::testing::Values(
            TrainLayout{
                .pp = 2, .tp = 2, .name = "pp2_tp2_recompute_all", .recompute = {.ratio = 1.0}},
            TrainLayout{.pp = 2, .name = "pp2_gpipe", .schedule = pipeline::ScheduleKind::kGPipe})),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param).name;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Image classifiers train on labelled images (tools/train_reference.py --images: 48 synthetic
// images in 3 classes as PNG and JPEG files, prepared by HF's load_image and
// ViTImageProcessorPil): read from the folder per class (named after id2label's classes, which
// sort in another order than their ids) or from the same files listed in JSON lines.
class ImageTraining
    : public ::testing::TestWithParam<std::tuple<std::string, TrainLayout, std::string>> {};

TEST_P(ImageTraining, MatchesTorchAdamWStepByStep) {
  const auto& [model, layout, source] = GetParam();
  const fs::path dir = test_data_dir() / "training-families" / (model + "-img");
  training::DataOptions data = reference_data_options();
  data.path = source == "folder" ? dir / "images" : dir / "train_images.jsonl";
  data.seq_len = 0;
  train_and_check(model, dir, layout, data, FamilyData::kImages,
                  model + " " + layout.name + " " + source);
}

INSTANTIATE_TEST_SUITE_P(
    Images, ImageTraining,
    ::testing::Values(
        std::tuple{"tiny-vit", TrainLayout{.name = "single"}, "folder"},
        std::tuple{"tiny-vit", TrainLayout{.tp = 2, .name = "tp2"}, "jsonl"},
        std::tuple{"tiny-vit", TrainLayout{.pp = 2, .name = "pp2"}, "folder"},
        std::tuple{"tiny-vit",
                   TrainLayout{.dp = 2, .tp = 2, .zero_stage = 1, .name = "dp2_tp2_zero1"},
                   "jsonl"},
        std::tuple{"tiny-beit", TrainLayout{.pp = 2, .tp = 2, .name = "pp2_tp2"}, "folder"},
        std::tuple{"tiny-swin",
                   TrainLayout{.dp = 2, .pp = 2, .zero_stage = 1, .name = "dp2_pp2_zero1"},
                   "jsonl"},
        std::tuple{"tiny-swin", TrainLayout{.tp = 2, .name = "tp2"}, "folder"}),
    [](const auto& info) {
      std::string name = std::get<0>(info.param) + "_" + std::get<1>(info.param).name + "_" +
                         std::get<2>(info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// HF transformers reads what every family that trains saved at pp 2 x tp 2 (each stage its own
// files, every tensor gathered over tp): from_pretrained loads it with no weight missing or left
// over, and its logits from the saved folder equal ours (tools/check_hf_loads.py). One Python
// process checks every family: starting one costs about 6 s (torch and transformers' imports).
void train_save_and_run(const std::string& name, const fs::path& dir) {
  const std::string model = family_model(name);
  const fs::path source = test_data_dir() / "training-families" / name;
  const TrainLayout layout{.pp = 2, .tp = 2, .name = "pp2_tp2"};
  expect_all_ranks_passed(run_ranks(static_cast<int>(layout.world()), [&](int rank, int port) {
    at::set_num_threads(1);
    const ModelFixture f(model, ModelFixture::ReferenceFile{source / "reference.safetensors"});
    const distributed::ProcessMesh mesh(rank, distributed::MeshShape{.pp = 2, .tp = 2},
                                        local_mesh_options(port));
    SessionOptions options{.checkpoint = source / "model"};
    options.pipeline.num_microbatches = 4;
    const auto session = f.session(options, &mesh);
    const training::TokenDataset data(family_data_options(name, source), 1013);
    Trainer trainer(*session, data, reference_train_options(kSteps));
    for (int s = 0; s < 3; ++s) trainer.step();
    trainer.save(dir / "saved");
  }));
  // Our logits from the saved folder, on one rank, for HF's from the same files.
  expect_all_ranks_passed(run_ranks(1, [&](int, int) {
    const ModelFixture f(model, ModelFixture::ReferenceFile{source / "reference.safetensors"});
    const auto session = f.session({.checkpoint = dir / "saved"});
    std::ofstream(dir / "architecture.txt") << session->architecture();
    const at::Tensor ids = at::arange(1, 25).view({2, 12});  // [2, 12]
    at::NoGradGuard no_grad;
    session->model().eval();
    if (session->model().is_encoder_decoder()) {
      const at::Tensor decoder_ids = at::arange(3, 11).view({2, 4});  // [2, 4]
      save_safetensors(
          dir / "logits.safetensors",
          {{"input_ids", ids},
           {"decoder_input_ids", decoder_ids},
           {"logits", session->forward({.input_ids = ids, .decoder_input_ids = decoder_ids})}});
    } else {
      save_safetensors(dir / "logits.safetensors",
                       {{"input_ids", ids}, {"logits", session->forward({.input_ids = ids})}});
    }
  }));
}

TEST(FamilySave, HFLoadsWhatEveryFamilySaved) {
  std::string command = str(python().string(), " ", (tools_dir() / "check_hf_loads.py").string());
  std::vector<fs::path> dirs;
  for (const std::string name : {"tiny-llama", "tiny-qwen3", "tiny-opt", "tiny-bloom",
                                 "tiny-bert-mlm", "tiny-bert-cls", "tiny-t5-s2s"}) {
    SCOPED_TRACE(name);
    const fs::path dir = dirs.emplace_back(scratch_dir("family-save-" + name));
    train_save_and_run(name, dir);
    std::string architecture;
    std::ifstream(dir / "architecture.txt") >> architecture;
    command += str(" ", (dir / "saved").string(), " ", architecture, " ",
                   (dir / "logits.safetensors").string());
  }
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  for (const fs::path& dir : dirs) fs::remove_all(dir);
}

// Token data without masking gives next-token labels: a masked-LM head is refused by name, not
// trained to copy its input.
TEST(TrainingRefuses, AMaskedLanguageModelWithoutMasking) {
  const ModelFixture f("tiny-bert", "families");
  const auto session = f.session(
      {.checkpoint = f.checkpoint.directory(), .architecture = "BertForMaskedLM"}, nullptr);
  const training::TokenDataset data(reference_data_options(), 1013);
  try {
    Trainer trainer(*session, data, reference_train_options(kSteps));
    ADD_FAILURE() << "a masked-LM model was accepted for training";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("BertForMaskedLM is a masked-LM model: its data needs "
                        "data.mlm_probability and data.mask_token_id"),
              std::string::npos)
        << error.what();
  }
}

// Data parallelism without a pipeline all-reduces each bucket of gradients from backward's
// hooks as soon as the last micro-batch has finished them: with 64 KiB buckets every bucket
// leaves before backward ends, and the steps still equal torch's.
TEST(TrainingOverlap, SendsEveryBucketDuringBackward) {
  on_training_ranks(TrainLayout{.dp = 2}, [&](const ModelFixture& f,
                                              const distributed::ProcessMesh* mesh, int rank) {
    const auto session = training_session(f, mesh, f.checkpoint.directory());
    const training::TokenDataset data(reference_data_options(), 1013);
    training::TrainOptions options = reference_train_options(kSteps);
    options.bucket_bytes = 64 << 10;
    Trainer trainer(*session, data, options);
    ASSERT_NE(trainer.reducer(), nullptr);
    EXPECT_GT(trainer.reducer()->num_buckets(), 5u);
    run_and_check(trainer, f.reference, 3, "dp2 overlapped");
    EXPECT_EQ(trainer.reducer()->sent_during_backward(),
              static_cast<int64_t>(trainer.reducer()->num_buckets()));
    if (rank == 0) {
      std::printf("%zu buckets, all sent during backward\n", trainer.reducer()->num_buckets());
    }
  });
}

// Ten steps, a save, a fresh session from the saved checkpoint, ten more at the same layout (one
// rank, dp 2 x tp 2 with ZeRO-1, pp 2): the same losses and gradient norms, to the bit, as twenty
// steps without a stop (and so the reference's), and every weight equal.
class TrainingResumeAtOneLayout : public ::testing::TestWithParam<TrainLayout> {};

TEST_P(TrainingResumeAtOneLayout, ContinuesBitForBit) {
  const TrainLayout layout = GetParam();
  const fs::path dir = scratch_dir("resume-" + layout.name);
  on_training_ranks(layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    const training::TokenDataset data(reference_data_options(), 1013);
    const distributed::ProcessGroup* tp = mesh != nullptr ? &mesh->tp() : nullptr;
    std::vector<StepMetrics> straight, resumed;
    std::map<std::string, at::Tensor> straight_weights;
    {
      const auto session = training_session(f, mesh, f.checkpoint.directory());
      Trainer trainer(*session, data, reference_train_options(kSteps, layout.zero_stage));
      straight = run_and_check(trainer, f.reference, kSteps, "uninterrupted");
      straight_weights = gather_parameters(session->model(), tp, false);
    }
    {
      const auto session = training_session(f, mesh, f.checkpoint.directory());
      Trainer trainer(*session, data, reference_train_options(kSteps, layout.zero_stage));
      resumed = run_and_check(trainer, f.reference, kSteps / 2, "first half");
      trainer.save(dir / "step-10");
      EXPECT_THROW(trainer.save(dir / "step-10"), Error);  // never overwrites
    }
    const auto session = training_session(f, mesh, dir / "step-10");
    Trainer trainer(*session, data, reference_train_options(kSteps, layout.zero_stage));
    trainer.load(dir / "step-10");
    EXPECT_EQ(trainer.steps_done(), kSteps / 2);
    for (const StepMetrics& m : run_and_check(trainer, f.reference, kSteps / 2, "second half")) {
      resumed.push_back(m);
    }
    ASSERT_EQ(resumed.size(), straight.size());
    for (size_t s = 0; s < straight.size(); ++s) {
      EXPECT_EQ(resumed[s].loss, straight[s].loss) << "step " << s;
      EXPECT_EQ(resumed[s].grad_norm, straight[s].grad_norm) << "step " << s;
    }
    // Every weight this rank holds, gathered over tp, the key bias included.
    const auto weights = gather_parameters(session->model(), tp, false);
    ASSERT_EQ(weights.size(), straight_weights.size());
    for (const auto& [name, weight] : weights) {
      EXPECT_TRUE(at::equal(weight, straight_weights.at(name))) << name << " differs";
    }
  });
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TrainingResumeAtOneLayout,
    ::testing::Values(TrainLayout{.name = "single"},
                      TrainLayout{.dp = 2, .tp = 2, .zero_stage = 1, .name = "dp2_tp2_zero1"},
                      TrainLayout{.pp = 2, .name = "pp2"}),
    [](const auto& info) { return info.param.name; });

// Saved at pp 2 x tp 2, resumed at dp 2 with ZeRO-1 and at tp 4: the moments and the data
// position carry over to any layout.
TEST(TrainingResume, ContinuesAtAnotherLayout) {
  const fs::path dir = scratch_dir("relayout");
  on_training_ranks(TrainLayout{.pp = 2, .tp = 2},
                    [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
                      const auto session = training_session(f, mesh, f.checkpoint.directory());
                      const training::TokenDataset data(reference_data_options(), 1013);
                      Trainer trainer(*session, data, reference_train_options(kSteps));
                      run_and_check(trainer, f.reference, kSteps / 2, "pp2_tp2");
                      trainer.save(dir / "step-10");
                    });
  ASSERT_TRUE(fs::exists(dir / "step-10" / "model.safetensors.index.json"));  // a file a stage
  EXPECT_FALSE(fs::exists(dir / "step-10.incomplete"));
  for (const TrainLayout& layout : {TrainLayout{.dp = 2, .zero_stage = 1, .name = "dp2_zero1"},
                                    TrainLayout{.tp = 4, .name = "tp4"}}) {
    on_training_ranks(
        layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
          const auto session = training_session(f, mesh, dir / "step-10");
          const training::TokenDataset data(reference_data_options(), 1013);
          Trainer trainer(*session, data, reference_train_options(kSteps, layout.zero_stage));
          trainer.load(dir / "step-10");
          run_and_check(trainer, f.reference, kSteps / 2, "resumed at " + layout.name);
          expect_final_state(*session, trainer, mesh, f.reference);
        });
  }
  fs::remove_all(dir);
}

// HF transformers reads what a pp 2 x tp 2 run saved: the weights and the AdamW moments equal
// torch's after the same 20 steps, and HF's logits from it equal ours
// (tools/check_training_checkpoint.py).
TEST(TrainingSave, HFLoadsTheSavedCheckpoint) {
  const fs::path dir = scratch_dir("hf");
  on_training_ranks(TrainLayout{.pp = 2, .tp = 2},
                    [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
                      const auto session = training_session(f, mesh, f.checkpoint.directory());
                      const training::TokenDataset data(reference_data_options(), 1013);
                      Trainer trainer(*session, data, reference_train_options(kSteps));
                      for (int64_t s = 0; s < kSteps; ++s) trainer.step();
                      trainer.save(dir / "final");
                    });
  // Our logits from the saved checkpoint, for HF's from the same files.
  on_training_ranks(TrainLayout{},
                    [&](const ModelFixture& f, const distributed::ProcessMesh*, int) {
                      const auto session = training_session(f, nullptr, dir / "final");
                      const training::TokenDataset data(reference_data_options(), 1013);
                      const training::Batch batch = data.train_batch({0, 1});
                      at::NoGradGuard no_grad;
                      session->model().eval();
                      const at::Tensor logits = session->forward({.input_ids = batch.input_ids});
                      save_safetensors(dir / "logits.safetensors",
                                       {{"input_ids", batch.input_ids}, {"logits", logits}});
                    });
  const std::string command =
      str(python().string(), " ", (tools_dir() / "check_training_checkpoint.py").string(), " ",
          (dir / "final").string(), " ", (training_dir() / "reference.safetensors").string(),
          " --steps ", kSteps, " --logits ", (dir / "logits.safetensors").string());
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  fs::remove_all(dir);
}

// A rank lost before the save completes: the save fails on the others within the collective
// timeout and nothing appears under the checkpoint's name.
TEST(TrainingSave, ALostRankLeavesNoCheckpoint) {
  const fs::path dir = scratch_dir("lost");
  expect_all_ranks_passed(run_ranks(2, [&](int rank, int port) {
    at::set_num_threads(1);
    const ModelFixture f("tiny-gpt2-train",
                         ModelFixture::ReferenceFile{training_dir() / "reference.safetensors"});
    const distributed::ProcessMesh mesh(rank, distributed::MeshShape{.dp = 2},
                                        local_mesh_options(port, std::chrono::seconds(10)));
    const auto session = training_session(f, &mesh, f.checkpoint.directory());
    const training::TokenDataset data(reference_data_options(), 1013);
    Trainer trainer(*session, data, reference_train_options(kSteps, /*zero_stage=*/1));
    trainer.step();
    if (rank == 1) _exit(0);  // gone before the save
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(trainer.save(dir / "step-1"), std::exception);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_FALSE(fs::exists(dir / "step-1"));
  }));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace shardformer::testing

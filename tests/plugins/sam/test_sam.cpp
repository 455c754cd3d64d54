// The SAM plugin against HF transformers at tp 1, 2 and 4 from tiny checkpoints: pred_masks and
// iou_scores for point prompts (every label: on, off, not a point, padding), for boxes, for
// points with boxes (one mask each) and for points with mask prompts, the image embeddings, and
// every parameter's gradient of a weighted sum of masks and scores; one checkpoint with windows
// that need padding and a global layer, one with windows tiling the grid, no absolute positions and
// a deeper decoder. Pipeline and sequence parallelism, unknown keys of the nested configs and
// malformed prompts are refused.
#include "family_checks.h"

namespace shardformer::testing {
namespace {

// The prompts of reference case `name` ("points", "boxes", "points_boxes", "points_masks") on
// its images.
ForwardInputs prompts(const ModelFixture& f, const std::string& name) {
  ForwardInputs inputs;
  inputs.pixel_values = f.ref("forward_pixel_values");  // [2, 3, 64, 64]
  const auto optional = [&](const std::string& key) {
    return f.reference.contains(name + "_" + key) ? f.ref(name + "_" + key) : at::Tensor();
  };
  inputs.input_points = optional("input_points");
  inputs.input_labels = optional("input_labels");
  inputs.input_boxes = optional("input_boxes");
  inputs.input_masks = optional("input_masks");
  inputs.multimask_output = name != "points_boxes";
  return inputs;
}

class SamFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(SamFamily, MasksScoresAndGradientsMatchHF) {
  const auto& [model, layout] = GetParam();
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    const auto session = layout_session(f, mesh, "SamModel");
    Model& sam = session->model();
    {
      at::NoGradGuard no_grad;
      for (const std::string name : {"points", "boxes", "points_boxes", "points_masks"}) {
        const auto out = sam.forward_all(prompts(f, name));
        expect_close_to_hf(f, out.at("pred_masks"), name + "_pred_masks", kOutputAtol, 0.0,
                           name + " pred_masks");
        expect_close_to_hf(f, out.at("iou_scores"), name + "_iou_scores", kOutputAtol, 0.0,
                           name + " iou_scores");
        expect_close_to_hf(f, out.at("image_embeddings"), "image_embeddings", kOutputAtol, 0.0,
                           "image embeddings");
      }
    }
    sam.train();
    const auto out = sam.forward_all(prompts(f, "points"));
    const at::Tensor loss = (out.at("pred_masks") * f.ref("train_mask_weights")).sum() +
                            (out.at("iou_scores") * f.ref("train_iou_weights")).sum();
    expect_close_to_hf(f, loss.detach().reshape({1}), "train_loss", kOutputAtol, 0.0, "loss");
    loss.backward();
    const auto grads = gather_parameters(sam, mesh ? &mesh->tp() : nullptr, /*grads=*/true);
    const std::vector<std::string> names = f.grad_names("grad.");
    const std::set<std::string> expected(names.begin(), names.end());
    size_t checked = 0;
    for (const auto& [name, grad] : grads) {
      if (!expected.contains(name)) {  // the box corners' embeddings: no box in this case
        EXPECT_TRUE(!grad.defined() || !grad.any().item<bool>())
            << "parameter " << name << " has a gradient where HF's has none";
        continue;
      }
      expect_close_to_hf(f, grad, "grad." + name, kGradAtol, kGradRtol, "grad of " + name);
      ++checked;
    }
    EXPECT_EQ(checked, expected.size());
  });
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, SamFamily,
    ::testing::Combine(::testing::Values("tiny-sam", "tiny-sam-options"),
                       ::testing::Values(Layout{1, 1, "tp1"}, Layout{2, 1, "tp2"},
                                         Layout{4, 1, "tp4"})),
    [](const auto& info) { return case_name(std::get<0>(info.param), std::get<1>(info.param)); });

// Both are refused before a model is built: SAM's config has no top-level layer count to split
// into stages, and its policy lists no sequence-parallel mode.
TEST(SamParallelism, PipelineAndSequenceParallelismAreRefused) {
  const auto expect_refused = [](const Layout& layout, const std::string& words) {
    on_ranks("tiny-sam", layout,
             [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
               try {
                 layout_session(f, mesh, "SamModel", layout);
                 ADD_FAILURE() << "SAM ran at " << layout.name;
               } catch (const Error& e) {
                 EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
               }
             });
  };
  expect_refused(Layout{1, 2, "pp2"}, "to split over 2 pipeline stages");
  expect_refused(Layout{.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"},
                 "this model family does not support it");
}

TEST(SamConfigKeys, UnknownKeysOfEachPartAreRefusedByName) {
  const ModelFixture f("tiny-sam", "families");
  for (const std::string part : {"vision_config", "prompt_encoder_config", "mask_decoder_config"}) {
    const auto edited = edited_checkpoint("tiny-sam", part, [&](auto& c) { c[part]["foo"] = 1; });
    try {
      f.session({.checkpoint = edited, .architecture = "SamModel"});
      ADD_FAILURE() << part << ".foo was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + part + ".foo'"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(edited);
  }
}

TEST(SamPrompts, MalformedPromptsAndImagesAreRefused) {
  const ModelFixture f("tiny-sam", "families");
  const auto session = f.session({.architecture = "SamModel"});
  at::NoGradGuard no_grad;
  const auto expect_error = [&](ForwardInputs inputs, const std::string& words) {
    try {
      session->model().forward_all(inputs);
      ADD_FAILURE() << "ran: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  ForwardInputs points = prompts(f, "points");
  points.input_points = points.input_points.narrow(3, 0, 1);  // no y
  expect_error(points, "input_points must be");
  points = prompts(f, "points");
  points.input_labels = points.input_labels.narrow(2, 0, 2);
  expect_error(points, "input_labels must be");
  ForwardInputs both = prompts(f, "points_boxes");
  both.input_boxes = both.input_boxes.narrow(1, 0, 1);  // one box for two point batches
  expect_error(both, "as many boxes as point batches");
  ForwardInputs small = prompts(f, "boxes");
  small.pixel_values = small.pixel_values.narrow(3, 0, 48);
  expect_error(small, "pixel_values must be [batch, 3, 64, 64]");
}

}  // namespace
}  // namespace shardformer::testing

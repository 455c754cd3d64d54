// The Swin plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2 from tiny
// checkpoints: SwinForImageClassification (logits, loss and every gradient, bf16 logits) and
// SwinModel (last hidden state and pooler output), on a square model of three stages (the
// pipeline's boundary inside a stage) and on a non-square one whose grids need padding to whole
// windows and patch merging from odd sizes, with absolute positions, one channel and no q / k / v
// biases; images of another size; sequence parallelism and interleaving refused by name.
#include "family_checks.h"

namespace shardformer::testing {
namespace {

class SwinFamily : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(SwinFamily, ClassifierAndBaseMatchHF) {
  const std::string& model = std::get<0>(GetParam());
  const Layout& layout = std::get<1>(GetParam());
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    check_image_classifier_and_base(f, mesh, "SwinForImageClassification", "SwinModel",
                                    /*train_mode=*/std::string(model).ends_with("-drop-path"));
  });
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, SwinFamily,
                         ::testing::Combine(::testing::Values("tiny-swin", "tiny-swin-options"),
                                            ::testing::ValuesIn(standard_layouts())),
                         [](const auto& info) {
                           return case_name(std::get<0>(info.param), std::get<1>(info.param));
                         });

// Stochastic depth in training (the attention branches'), at tp 1, tp 2 and pp 2.
INSTANTIATE_TEST_SUITE_P(
    DropPath, SwinFamily,
    ::testing::Combine(::testing::Values("tiny-swin-drop-path"),
                       ::testing::Values(Layout{1, 1, "tp1"}, Layout{2, 1, "tp2"},
                                         Layout{1, 2, "pp2"})),
    [](const auto& info) { return case_name(std::get<0>(info.param), std::get<1>(info.param)); });

// Images of another size (27 x 45: padded to whole patches, windows and merges) equal HF's at
// tp 2; with absolute positions another size is refused naming both sizes, and so is
// interpolate_pos_encoding.
TEST(SwinImageSize, OtherSizesRunAsHFsOrAreRefused) {
  on_ranks(
      "tiny-swin", Layout{2, 1, "tp2"},
      [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session = layout_session(f, mesh, "SwinModel");
        ForwardInputs inputs;
        inputs.pixel_values = f.ref("other_size_pixel_values");  // [2, 3, 27, 45]
        expect_close(session->forward(inputs), f.ref("other_size_last_hidden_state"), kOutputAtol,
                     0.0, "another image size");
        inputs.pixel_values = inputs.pixel_values.narrow(2, 0, 20);  // a 10 x 23 grid
        try {
          session->forward(inputs);
          ADD_FAILURE() << "a grid smaller than a window ran";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("smaller than window_size 4"), std::string::npos)
              << e.what();
        }
      });
  const ModelFixture f("tiny-swin-options", "families");
  const auto session = f.session({.architecture = "SwinModel"});
  ForwardInputs inputs;
  inputs.pixel_values = at::zeros({1, 1, 24, 28});
  try {
    session->forward(inputs);
    ADD_FAILURE() << "an image of another size ran with absolute positions";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("24 x 28"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("20 x 28"), std::string::npos) << e.what();
  }
  inputs.pixel_values = at::zeros({1, 1, 20, 28});
  inputs.interpolate_pos_encoding = true;
  EXPECT_THROW(session->forward(inputs), Error);
  inputs.interpolate_pos_encoding = false;
  inputs.pixel_values = at::zeros({1, 3, 20, 28});  // three channels, the model takes one
  EXPECT_THROW(session->forward(inputs), Error);
}

// Sequence parallelism does not split windows of image tokens: refused naming the model.
TEST(SwinSequenceParallel, IsRefusedByName) {
  expect_sequence_parallelism_refused("tiny-swin", "SwinForImageClassification", "Swin");
}

TEST(SwinConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  check_config_keys_that_change_no_math("tiny-swin", "families", "SwinForImageClassification",
                                        "forward_logits");
}

}  // namespace
}  // namespace shardformer::testing

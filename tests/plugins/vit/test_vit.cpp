// The ViT plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2 from tiny checkpoints:
// ViTForImageClassification (logits, loss and every gradient, bf16 logits) and ViTModel (last
// hidden state and pooler output), on a square model and on one of non-square images and patches,
// one channel, no q / k / v biases, another pooler; the patch embedding split by output channels
// when a policy rule asks; positions interpolated for other image sizes as HF interpolates them.
// BEiT (BeitForImageClassification, BeitModel) the same way, with a bias table per layer (layer
// scale, mean pooling) and with one table shared by every layer (held by each pipeline stage).
#include "family_checks.h"

namespace shardformer::testing {
namespace {

struct Case {
  std::string model;
  Layout layout;
};

void PrintTo(const Case& c, std::ostream* os) { *os << case_name(c.model, c.layout); }

class ViTFamily : public ::testing::TestWithParam<Case> {};

TEST_P(ViTFamily, ClassifierAndBaseMatchHF) {
  const Case& c = GetParam();
  const std::string family = c.model.starts_with("tiny-beit") ? "Beit" : "ViT";
  on_ranks(c.model, c.layout,
           [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
             check_image_classifier_and_base(f, mesh, family + "ForImageClassification",
                                             family + "Model",
                                             /*train_mode=*/c.model.ends_with("-drop-path"));
           });
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const Layout& layout : standard_layouts()) all.push_back({"tiny-vit", layout});
  for (const Layout& layout : standard_layouts()) all.push_back({"tiny-vit-options", layout});
  for (const Layout& layout : standard_layouts()) all.push_back({"tiny-beit", layout});
  for (const Layout& layout : standard_layouts()) all.push_back({"tiny-beit-shared", layout});
  // Stochastic depth in training: the same samples dropped at every tp. (Under pp 2's
  // micro-batches BEiT's one module, drawn for both branches, draws in another order than for
  // one batch: other samples dropped, with the same probabilities.)
  for (const Layout& layout : {Layout{1, 1, "tp1"}, Layout{2, 1, "tp2"}}) {
    all.push_back({"tiny-beit-drop-path", layout});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, ViTFamily, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return case_name(info.param.model, info.param.layout);
                         });

// A policy rule splits the patch embedding's output channels over tp: the same logits and
// gradients (its weight gathered back whole).
TEST(ViTPatchEmbedding, ColumnParallelMatchesHF) {
  on_ranks("tiny-vit", Layout{2, 1, "tp2"},
           [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
             SessionOptions options{.architecture = "ViTForImageClassification"};
             options.overrides.add({"embeddings.patch_embeddings.projection", styles::column});
             const auto session = f.session(options, mesh);
             EXPECT_TRUE(session->model().sharding().contains(
                 "vit.embeddings.patch_embeddings.projection.weight"));
             check_output_loss_and_grads(f, *session, mesh, "forward_logits", "train_labels",
                                         "train_loss", "grad.");
           });
}

// Images of another size: refused by default, naming both sizes; with interpolate_pos_encoding,
// HF's bicubic interpolation of the positions.
TEST(ViTImageSize, OtherSizesAreRefusedOrInterpolated) {
  const ModelFixture f("tiny-vit", "families");
  const auto session = f.session({.architecture = "ViTModel"});
  ForwardInputs inputs;
  inputs.pixel_values = f.ref("interpolate_pixel_values");  // [2, 3, 48, 40]
  try {
    session->forward(inputs);
    ADD_FAILURE() << "an image of another size ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("48 x 40"), std::string::npos) << e.what();
  }
  inputs.interpolate_pos_encoding = true;
  expect_close(session->forward(inputs), f.ref("interpolate_last_hidden_state"), kOutputAtol, 0.0,
               "interpolated positions");
  inputs.pixel_values = inputs.pixel_values.narrow(1, 0, 1);
  EXPECT_THROW(session->forward(inputs), Error);  // one channel, the model takes three
}

// Sequence parallelism does not split image tokens yet: refused naming the model.
TEST(ViTSequenceParallel, IsRefusedByName) {
  expect_sequence_parallelism_refused("tiny-vit", "ViTForImageClassification", "ViT");
}

TEST(ViTConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  check_config_keys_that_change_no_math("tiny-vit", "families", "ViTForImageClassification",
                                        "forward_logits");
}

}  // namespace
}  // namespace shardformer::testing

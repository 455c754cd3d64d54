// The BERT plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2, from one tiny
// checkpoint: BertForMaskedLM (the tied decoder with its bias, vocab-parallel; MLM loss and every
// gradient), BertForSequenceClassification (pooler and a 3-label classifier, which divides by no
// tp; classification loss and gradients) and BertModel (last hidden state and pooler output),
// with token type ids and padding masks. Also the real all-MiniLM-L6-v2 checkpoint: it loads
// with every tensor and config key used.
#include "family_checks.h"

#include "test_env.h"

using namespace shardformer;
using shardformer::testing::check_output_loss_and_grads;
using shardformer::testing::kOutputAtol;
using shardformer::testing::Layout;
using shardformer::testing::layout_session;
using shardformer::testing::ModelFixture;

namespace {

class BertFamily : public ::testing::TestWithParam<Layout> {};

TEST_P(BertFamily, MaskedLMClassificationAndBaseMatchHF) {
  shardformer::testing::on_ranks(
      "tiny-bert", GetParam(),
      [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto mlm = layout_session(f, mesh, "BertForMaskedLM");
        check_output_loss_and_grads(f, *mlm, mesh, "forward_logits", "train_labels", "train_loss",
                                    "grad.");
        const auto classifier = layout_session(f, mesh, "BertForSequenceClassification");
        check_output_loss_and_grads(f, *classifier, mesh, "forward_classification_logits",
                                    "classification_labels", "classification_loss",
                                    "grad_classification.");
        const auto base = layout_session(f, mesh, "BertModel");
        const at::Tensor hidden = base->forward(f.forward_inputs());
        if (base->holds_output()) {
          shardformer::testing::expect_close(hidden, f.ref("forward_last_hidden_state"),
                                             kOutputAtol, 0.0, "last hidden state");
        }
        if (mesh == nullptr || mesh->shape().pp == 1) {  // both outputs of one forward
          at::NoGradGuard no_grad;
          const auto outputs = base->model().forward_all(f.forward_inputs());
          shardformer::testing::expect_close(outputs.at("pooler_output"),
                                             f.ref("forward_pooler_output"), kOutputAtol, 0.0,
                                             "pooler output");
        }
      });
}

INSTANTIATE_TEST_SUITE_P(Layouts, BertFamily,
                         ::testing::ValuesIn(shardformer::testing::standard_layouts()),
                         [](const auto& info) { return info.param.name; });

}  // namespace

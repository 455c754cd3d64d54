// The BERT plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2, from one tiny
// checkpoint: BertForMaskedLM (the tied decoder with its bias, vocab-parallel; MLM loss and every
// gradient), BertForSequenceClassification (pooler and a 3-label classifier, which divides by no
// tp; classification loss and gradients) and BertModel (last hidden state and pooler output),
// with token type ids and padding masks; an untied MLM decoder (tie_word_embeddings = false).
// RoBERTa the same way (RobertaForMaskedLM's lm_head, RobertaForSequenceClassification's
// two-layer head on the first token, RobertaModel; positions counted past pad_token_id) and
// ERNIE's (task-type embeddings), and ALBERT's (factorized embeddings, shared layers; tp only,
// pp refused). Also
// the real all-MiniLM-L6-v2 through the host's embed job: sentence-transformers' embeddings at tp 1
// and 2.
#include "family_checks.h"

#include "shardformer/checkpoint_io/safetensors.h"
#include "test_env.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace shardformer;
using shardformer::testing::check_output_loss_and_grads;
using shardformer::testing::kOutputAtol;
using shardformer::testing::Layout;
using shardformer::testing::layout_session;
using shardformer::testing::ModelFixture;

namespace {

// A checkpoint and its family's class-name prefix (Bert, Roberta).
struct Case {
  std::string model, family;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class BertFamily : public ::testing::TestWithParam<std::tuple<Case, Layout>> {};

TEST_P(BertFamily, MaskedLMClassificationAndBaseMatchHF) {
  const Case& c = std::get<0>(GetParam());
  const Layout& layout = std::get<1>(GetParam());
  shardformer::testing::on_ranks(
      c.model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto mlm = layout_session(f, mesh, c.family + "ForMaskedLM");
        check_output_loss_and_grads(f, *mlm, mesh, "forward_logits", "train_labels", "train_loss",
                                    "grad.");
        const auto classifier = layout_session(f, mesh, c.family + "ForSequenceClassification");
        check_output_loss_and_grads(f, *classifier, mesh, "forward_classification_logits",
                                    "classification_labels", "classification_loss",
                                    "grad_classification.");
        const auto base = layout_session(f, mesh, c.family + "Model");
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

INSTANTIATE_TEST_SUITE_P(
    Layouts, BertFamily,
    ::testing::Combine(::testing::Values(Case{"tiny-bert", "Bert"}, Case{"tiny-roberta", "Roberta"},
                                         Case{"tiny-ernie", "Ernie"}),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param).model,
                                             std::get<1>(info.param));
    });

// ALBERT: factorized embeddings and layers shared over the depth (2 groups of 2), split once
// by tp; a pipeline cannot split shared layers and is refused by name.
INSTANTIATE_TEST_SUITE_P(SharedLayers, BertFamily,
                         ::testing::Combine(::testing::Values(Case{"tiny-albert", "Albert"}),
                                            ::testing::Values(Layout{1, 1, "tp1"},
                                                              Layout{2, 1, "tp2"},
                                                              Layout{4, 1, "tp4"})),
                         [](const auto& info) {
                           return shardformer::testing::case_name(std::get<0>(info.param).model,
                                                                  std::get<1>(info.param));
                         });

TEST(AlbertPipeline, IsRefusedByName) {
  shardformer::testing::on_ranks(
      "tiny-albert", Layout{1, 2, "pp2"},
      [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        try {
          layout_session(f, mesh, "AlbertForMaskedLM");
          ADD_FAILURE() << "a pipeline split ALBERT's shared layers";
        } catch (const ModelError& e) {
          EXPECT_NE(std::string(e.what()).find("ALBERT runs its shared layers"), std::string::npos)
              << e.what();
        }
      });
}

// tie_word_embeddings = false: the MLM decoder's own weight and bias (vocab-parallel), as HF
// computes it; HF's unused cls.predictions.bias is left unread.
class BertUntied : public ::testing::TestWithParam<Layout> {};

TEST_P(BertUntied, MaskedLMMatchesHF) {
  shardformer::testing::on_ranks(
      "tiny-bert-untied", GetParam(),
      [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto mlm = layout_session(f, mesh, "BertForMaskedLM");
        check_output_loss_and_grads(f, *mlm, mesh, "forward_logits", "train_labels", "train_loss",
                                    "grad.");
      });
}

INSTANTIATE_TEST_SUITE_P(Layouts, BertUntied,
                         ::testing::Values(Layout{1, 1, "tp1"}, Layout{2, 1, "tp2"},
                                           Layout{1, 2, "pp2"}),
                         [](const auto& info) { return info.param.name; });

// The embed job on the real all-MiniLM-L6-v2, through shardformer-host as users run it, against
// sentence-transformers' embeddings of 24 varied texts (one truncated at 256 tokens), at the
// model's max_seq_length and at 16 tokens.
class MiniLMEmbeddings : public ::testing::TestWithParam<int> {};

TEST_P(MiniLMEmbeddings, EqualSentenceTransformers) {
  namespace fs = std::filesystem;
  const int tp = GetParam();
  const fs::path data = shardformer::testing::test_data_dir() / "minilm";
  const SafetensorsFile reference(data / "reference.safetensors");
  for (const int64_t max_length : {int64_t{0}, int64_t{16}}) {
    const fs::path dir =
        fs::path(::testing::TempDir()) /
        ("shardformer_minilm_tp" + std::to_string(tp) + "_" + std::to_string(max_length));
    fs::create_directories(dir);
    std::ofstream(dir / "job.toml")
        << "[model]\npath = \""
        << (shardformer::testing::models_dir() / "all-MiniLM-L6-v2").string()
        << "\"\n[parallel]\ntp_size = " << tp << "\n[job]\nmode = \"embed\"\n[embed]\n"
        << "sentences_file = \"" << (data / "sentences.txt").string() << "\"\noutput = \""
        << (dir / "out.safetensors").string() << "\"\nbatch_size = 8\n"
        << (max_length > 0 ? "max_length = " + std::to_string(max_length) + "\n" : "");
    const std::string command = shardformer::testing::host_binary().string() + " run " +
                                (dir / "job.toml").string() + " > " + (dir / "log").string() +
                                " 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const at::Tensor ours = SafetensorsFile(dir / "out.safetensors").read("embeddings");
    const at::Tensor expected =
        reference.read(max_length > 0 ? "embeddings_max_length_16" : "embeddings");
    shardformer::testing::expect_close(ours, expected, 1e-5, 0.0,
                                       "embeddings, max_length " + std::to_string(max_length));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MiniLMEmbeddings, ::testing::Values(1, 2),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

// config.json keys that change no math (bookkeeping, token ids, generation defaults, export
// tools' leftovers) load and the logits still equal HF's; keys that change the math are refused.
TEST(RobertaConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-roberta", "families", "RobertaForMaskedLM", "forward_logits");
}

TEST(ErnieConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-ernie", "families",
                                                              "ErnieForMaskedLM", "forward_logits");
}

TEST(AlbertConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-albert", "families", "AlbertForMaskedLM", "forward_logits");
}

TEST(BertConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-bert", "families",
                                                              "BertForMaskedLM", "forward_logits");
}

}  // namespace

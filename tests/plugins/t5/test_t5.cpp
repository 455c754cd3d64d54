// The T5 plugin against HF transformers at tp 1, 2, 4, pp 2 (three stage boundaries: inside the
// encoder, at its end, inside the decoder) and pp 2 x tp 2: T5 v1.0 (ReLU, the tied head scaled,
// 3 encoder and 2 decoder blocks) and v1.1 (gated GELU, an untied head, 6 heads: uneven at tp 4):
// logits, loss and every gradient, greedy generation (the encoder run once, cross-attention's
// keys and values cached), the encoder alone, bf16; and what T5 refuses by name.
#include "family_checks.h"

namespace shardformer::testing {
namespace {

// A layout and, under a pipeline, the blocks of each stage (encoder's then decoder's: 3 + 2).
struct T5Layout {
  Layout layout;
  std::vector<int64_t> layers_per_stage{};
};

void PrintTo(const T5Layout& l, std::ostream* os) { *os << l.layout.name; }

class T5Family : public ::testing::TestWithParam<std::tuple<std::string, T5Layout>> {};

TEST_P(T5Family, MatchesHFAtThisLayout) {
  const auto& [model, t5_layout] = GetParam();
  const Layout& layout = t5_layout.layout;
  const auto session_of = [&](const ModelFixture& f, const distributed::ProcessMesh* mesh,
                              const std::string& architecture, c10::ScalarType dtype) {
    SessionOptions options{.architecture = architecture, .dtype = dtype};
    if (layout.pp > 1) {
      options.pipeline.num_microbatches = 2;
      options.pipeline.layers_per_stage = t5_layout.layers_per_stage;
    }
    return f.session(options, mesh);
  };
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    const auto session = session_of(f, mesh, "T5ForConditionalGeneration", at::kFloat);
    ASSERT_TRUE(session->model().is_encoder_decoder());
    check_output_loss_and_grads(f, *session, mesh, "forward_logits", "train_labels", "train_loss",
                                "grad.");
    // The loss without decoder inputs: HF's labels= shifts the labels right into them.
    ForwardInputs from_labels = f.forward_inputs();
    from_labels.decoder_input_ids = at::Tensor();
    const at::Tensor loss = session->loss(from_labels, f.ref("train_labels"));
    if (session->holds_output()) {
      expect_close_to_hf(f, loss.reshape({1}), "train_loss", kOutputAtol, 0.0,
                         "loss from labels alone");
    }

    for (const bool with_eos : {false, true}) {
      const GenerationResult result = session->generate(f.prompts(), f.generation_config(with_eos));
      const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
      EXPECT_TRUE(at::equal(result.sequences, f.ref(key))) << key << ": ours\n"
                                                           << result.sequences << "\nHF\n"
                                                           << f.ref(key);
    }

    if (layout.pp == 1) {
      const auto encoder = session_of(f, mesh, "T5EncoderModel", at::kFloat);
      expect_close_to_hf(f, encoder->forward(f.forward_inputs()), "forward_last_hidden_state",
                         kOutputAtol, 0.0, "encoder hidden states");
    }
    check_bfloat16_logits(f, *session_of(f, mesh, "T5ForConditionalGeneration", at::kBFloat16));
  });
}

std::vector<T5Layout> t5_layouts() {
  return {{{1, 1, "tp1"}},
          {{2, 1, "tp2"}},
          {{4, 1, "tp4"}},
          {{1, 2, "pp2_in_encoder"}, {2, 3}},
          {{1, 2, "pp2_at_encoder_end"}, {3, 2}},
          {{1, 2, "pp2_in_decoder"}, {4, 1}},
          {{2, 2, "pp2_tp2"}, {3, 2}}};
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, T5Family,
                         ::testing::Combine(::testing::Values("tiny-t5", "tiny-t5-v1_1"),
                                            ::testing::ValuesIn(t5_layouts())),
                         [](const auto& info) {
                           return case_name(std::get<0>(info.param),
                                            std::get<1>(info.param).layout);
                         });

// The encoder alone does not split over stages: refused by name, not run wrong.
TEST(T5Layouts, EncoderModelUnderPipelineIsRefusedByName) {
  on_ranks("tiny-t5", {1, 2, "pp2"},
           [](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
             try {
               layout_session(f, mesh, "T5EncoderModel");
               ADD_FAILURE() << "T5EncoderModel was built under pipeline parallelism";
             } catch (const ModelError& e) {
               EXPECT_NE(std::string(e.what()).find("pipeline"), std::string::npos) << e.what();
             }
           });
}

TEST(T5Inputs, ForwardWithoutDecoderInputsNamesThem) {
  const ModelFixture f("tiny-t5", "families");
  const auto session = f.session({.architecture = "T5ForConditionalGeneration"});
  ForwardInputs inputs = f.forward_inputs();
  inputs.decoder_input_ids = at::Tensor();
  try {
    session->forward(inputs);
    ADD_FAILURE() << "a forward pass without decoder inputs ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("decoder_input_ids"), std::string::npos) << e.what();
  }
}

TEST(T5ConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  check_config_keys_that_change_no_math("tiny-t5", "families", "T5ForConditionalGeneration",
                                        "forward_logits");
}

}  // namespace
}  // namespace shardformer::testing

// The T5 plugin against HF transformers at tp 1, 2, 4, pp 2 (three stage boundaries: inside the
// encoder, at its end, inside the decoder) and pp 2 x tp 2: T5 v1.0 (ReLU, the tied head scaled,
// 3 encoder and 2 decoder blocks) and v1.1 (gated GELU, an untied head, 6 heads: uneven at tp 4):
// logits, loss and every gradient, greedy generation (the encoder run once, cross-attention's
// keys and values cached), the encoder alone, bf16 and fp16 (wo in fp32, as HF's); and what T5
// refuses by name.
#include "family_checks.h"

namespace shardformer::testing {
namespace {

class T5Family : public ::testing::TestWithParam<std::tuple<std::string, StackLayout>> {};

TEST_P(T5Family, MatchesHFAtThisLayout) {
  const std::string& model = std::get<0>(GetParam());
  const StackLayout& layout = std::get<1>(GetParam());
  on_ranks(
      model, layout.layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session = stack_session(f, mesh, layout, "T5ForConditionalGeneration");
        check_seq2seq_output_loss_and_grads(f, *session, mesh);

        for (const bool with_eos : {false, true}) {
          const GenerationResult result =
              session->generate(f.prompts(), f.generation_config(with_eos));
          const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
          EXPECT_TRUE(at::equal(result.sequences, f.ref(key))) << key << ": ours\n"
                                                               << result.sequences << "\nHF\n"
                                                               << f.ref(key);
        }

        if (layout.layout.pp == 1) {
          const auto encoder = stack_session(f, mesh, layout, "T5EncoderModel");
          expect_close_to_hf(f, encoder->forward(f.forward_inputs()), "forward_last_hidden_state",
                             kOutputAtol, 0.0, "encoder hidden states");
        }
        check_bfloat16_logits(
            f, *stack_session(f, mesh, layout, "T5ForConditionalGeneration", at::kBFloat16));
        check_bfloat16_logits(
            f, *stack_session(f, mesh, layout, "T5ForConditionalGeneration", at::kHalf), at::kHalf);
      });
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, T5Family,
                         ::testing::Combine(::testing::Values("tiny-t5", "tiny-t5-v1_1"),
                                            ::testing::ValuesIn(encoder_decoder_layouts())),
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

// In fp16 HF keeps every feed-forward's wo in fp32 (_keep_in_fp32_modules), and so does the
// plugin.
TEST(T5DataTypes, Float16KeepsWoInFp32AsHFDoes) {
  on_ranks(
      "tiny-t5-v1_1", {2, 1, "tp2"},
      [](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        for (const std::string architecture : {"T5ForConditionalGeneration", "T5EncoderModel"}) {
          const auto session = layout_session(f, mesh, architecture, {}, at::kHalf);
          int64_t kept = 0;
          for (const auto& item : session->model().named_parameters()) {
            const bool wo = item.key().ends_with(".wo.weight");
            kept += wo ? 1 : 0;
            EXPECT_EQ(item.value().scalar_type(), wo ? at::kFloat : at::kHalf) << item.key();
          }
          EXPECT_GT(kept, 0) << architecture;
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

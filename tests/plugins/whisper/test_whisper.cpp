// The Whisper plugin against HF transformers at tp 1, 2, 4, pp 2 (the stage boundary inside the
// encoder, at its end, inside the decoder) and pp 2 x tp 2, from log-mel features: logits, loss
// and every gradient, greedy generation from a decoder prompt (the audio encoder run once),
// WhisperModel's hidden states and bf16 and fp16 logits.
#include "family_checks.h"

namespace shardformer::testing {
namespace {

class WhisperFamily : public ::testing::TestWithParam<StackLayout> {};

TEST_P(WhisperFamily, MatchesHFAtThisLayout) {
  const StackLayout& layout = GetParam();
  on_ranks("tiny-whisper", layout.layout,
           [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
             const auto session = stack_session(f, mesh, layout, "WhisperForConditionalGeneration");
             check_seq2seq_output_loss_and_grads(f, *session, mesh);

             const at::Tensor prompt = f.ref("generate_decoder_prompt");
             for (const bool with_eos : {false, true}) {
               GenerationConfig config = f.generation_config(with_eos);
               config.decoder_prompt.assign(prompt.data_ptr<int64_t>(),
                                            prompt.data_ptr<int64_t>() + prompt.numel());
               const GenerationResult result =
                   session->generate_from_features(f.ref("generate_input_features"), config);
               const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
               EXPECT_TRUE(at::equal(result.sequences, f.ref(key))) << key << ": ours\n"
                                                                    << result.sequences << "\nHF\n"
                                                                    << f.ref(key);
             }

             const auto base = stack_session(f, mesh, layout, "WhisperModel");
             const at::Tensor hidden = base->forward(f.forward_inputs());
             if (base->holds_output()) {
               expect_close_to_hf(f, hidden, "forward_last_hidden_state", kOutputAtol, 0.0,
                                  "decoder hidden states");
             }
             for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
               check_bfloat16_logits(
                   f, *stack_session(f, mesh, layout, "WhisperForConditionalGeneration", dtype),
                   dtype);
             }
           });
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, WhisperFamily, ::testing::ValuesIn(encoder_decoder_layouts()),
                         [](const auto& info) {
                           return case_name("tiny-whisper", info.param.layout);
                         });

// Features of the wrong shape (mel bins, 30 s of frames) are refused naming both.
TEST(WhisperInputs, FeaturesOfAnotherShapeAreRefused) {
  const ModelFixture f("tiny-whisper", "families");
  const auto session = f.session({.architecture = "WhisperForConditionalGeneration"});
  ForwardInputs inputs = f.forward_inputs();
  inputs.input_features = inputs.input_features.narrow(2, 0, 20);
  try {
    session->forward(inputs);
    ADD_FAILURE() << "features of 20 frames ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input_features must be"), std::string::npos) << e.what();
  }
}

TEST(WhisperConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  check_config_keys_that_change_no_math("tiny-whisper", "families",
                                        "WhisperForConditionalGeneration", "forward_logits");
}

}  // namespace
}  // namespace shardformer::testing

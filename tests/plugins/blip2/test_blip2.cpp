// The BLIP-2 plugin against HF transformers at tp 1, 2 and 4 from tiny checkpoints with an OPT and
// a T5 language model: the logits of prompts whose image tokens take the Q-Former's features, the
// LM loss and every parameter's gradient (vision encoder, query tokens, Q-Former, projection,
// OPT or T5), and greedy generation from images token for token; bf16 and fp16 logits. Pipeline
// and sequence parallelism, unknown keys of the nested configs, prompts without their image
// tokens and missing images are refused.
#include "family_checks.h"

#include "shardformer/generation.h"

namespace shardformer::testing {
namespace {

// Logits, loss, every gradient and greedy generation from images against HF's. With T5 the
// generated sequences are the decoder's (decoder_start_token_id, then the new tokens).
void check_against_hf(const ModelFixture& f, const distributed::ProcessMesh* mesh) {
  const auto session = layout_session(f, mesh, "Blip2ForConditionalGeneration");
  check_output_loss_and_grads(f, *session, mesh, "forward_logits", "train_labels", "train_loss",
                              "grad.");
  const at::Tensor start = f.ref("generate_input_ids");  // [2, image tokens + bos or eos]
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t row = 0; row < start.size(0); ++row) {
    const at::Tensor r = start[row].contiguous();
    prompts.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  const at::Tensor expected = f.ref("generate_sequences");
  const bool seq2seq = session->model().is_encoder_decoder();
  GenerationConfig config;  // no eos: HF's reference decodes every step
  config.max_new_tokens = expected.size(1) - (seq2seq ? 1 : start.size(1));
  if (seq2seq) config.decoder_start_token_id = expected[0][0].item<int64_t>();
  const GenerationResult result =
      session->generate_with_images(prompts, f.ref("forward_pixel_values"), config);
  EXPECT_TRUE(at::equal(result.sequences, expected)) << result.sequences << "\nHF:\n" << expected;
}

class Blip2Family : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(Blip2Family, LogitsLossGradientsAndGenerationMatchHF) {
  const auto& [model, layout] = GetParam();
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    check_against_hf(f, mesh);
  });
}

// In bf16 every part computes in bf16, as HF's; in fp16 HF keeps the query tokens, the Q-Former
// and a T5 language model's wo in fp32 (_keep_in_fp32_modules), and so does the plugin. Each
// job's logits are within twice HF's own error in that dtype of HF's fp32 logits.
TEST(Blip2LowPrecision, Fp16KeepsWhatHFKeepsInFp32) {
  for (const std::string model : {"tiny-blip2", "tiny-blip2-t5"}) {
    on_ranks(model, Layout{2, 1, "tp2"},
             [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
               for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
                 const auto session =
                     layout_session(f, mesh, "Blip2ForConditionalGeneration", {}, dtype);
                 for (const auto& item : session->model().named_parameters()) {
                   const bool kept = dtype == at::kHalf && (item.key().starts_with("qformer.") ||
                                                            item.key() == "query_tokens" ||
                                                            item.key().ends_with(".wo.weight"));
                   EXPECT_EQ(item.value().scalar_type(), kept ? at::kFloat : dtype)
                       << model << ": " << item.key();
                 }
                 check_bfloat16_logits(f, *session, dtype);
               }
             });
  }
}

// tiny-blip2: OPT's causal LM; tiny-blip2-t5: T5's encoder-decoder (as blip2-flan-t5's), its
// head tied to shared as transformers 5 saves it, or untied as older versions did.
INSTANTIATE_TEST_SUITE_P(
    Checkpoints, Blip2Family,
    ::testing::Combine(::testing::Values("tiny-blip2", "tiny-blip2-t5", "tiny-blip2-t5-untied"),
                       ::testing::Values(Layout{1, 1, "tp1"}, Layout{2, 1, "tp2"},
                                         Layout{4, 1, "tp4"})),
    [](const auto& info) { return case_name(std::get<0>(info.param), std::get<1>(info.param)); });

// Both are refused before a model is built: BLIP-2's config has no top-level layer count to
// split into stages, and its policy lists no sequence-parallel mode.
TEST(Blip2Parallelism, PipelineAndSequenceParallelismAreRefused) {
  const auto expect_refused = [](const Layout& layout, const std::string& words) {
    on_ranks("tiny-blip2", layout,
             [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
               try {
                 layout_session(f, mesh, "Blip2ForConditionalGeneration", layout);
                 ADD_FAILURE() << "BLIP-2 ran at " << layout.name;
               } catch (const Error& e) {
                 EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
               }
             });
  };
  expect_refused(Layout{1, 2, "pp2"}, "to split over 2 pipeline stages");
  expect_refused(Layout{.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"},
                 "this model family does not support it");
}

TEST(Blip2ConfigKeys, UnknownKeysOfEachPartAreRefusedByName) {
  const ModelFixture f("tiny-blip2", "families");
  for (const std::string part : {"vision_config", "qformer_config", "text_config"}) {
    const auto edited = edited_checkpoint("tiny-blip2", part, [&](auto& c) { c[part]["foo"] = 1; });
    try {
      f.session({.checkpoint = edited, .architecture = "Blip2ForConditionalGeneration"});
      ADD_FAILURE() << part << ".foo was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'" + part + ".foo'"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(edited);
  }
}

TEST(Blip2Inputs, PromptsWithoutTheirImageTokensAndMissingImagesAreRefused) {
  const ModelFixture f("tiny-blip2", "families");
  const auto session = f.session({.architecture = "Blip2ForConditionalGeneration"});
  at::NoGradGuard no_grad;
  const auto expect_error = [&](const ForwardInputs& inputs, const std::string& words) {
    try {
      session->model().forward(inputs);
      ADD_FAILURE() << "ran: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  ForwardInputs short_prompt = f.forward_inputs();
  short_prompt.input_ids = short_prompt.input_ids.narrow(1, 1, short_prompt.input_ids.size(1) - 1);
  expect_error(short_prompt, "row 0 of input_ids holds 3 image tokens");
  ForwardInputs no_image = f.forward_inputs();
  no_image.pixel_values = at::Tensor();
  expect_error(no_image, "BLIP-2 reads pixel_values");
  ForwardInputs one_image = f.forward_inputs();
  one_image.pixel_values = one_image.pixel_values.narrow(0, 0, 1);
  expect_error(one_image, "1 images for 2 rows");
  ForwardInputs small = f.forward_inputs();
  small.pixel_values = small.pixel_values.narrow(3, 0, 20);
  expect_error(small, "pixel_values of 30 x 20 pixels");
}

}  // namespace
}  // namespace shardformer::testing

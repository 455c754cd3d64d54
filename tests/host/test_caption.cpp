// Images in, text out: the host's caption job with tiny-blip2 (OPT) and tiny-blip2-t5 (T5)
// against HF (load_image, Blip2Processor with the folder's tokenizer and BLIP image processor,
// greedy generate(); tools/gen_caption_reference.py) at tp 1 and tp 2, with no text prompt and
// with one: every caption's ids and text, printed and written as JSON lines; a model that writes
// no text is refused.
#include "job_run.h"

namespace shardformer::testing {
namespace {

class CaptionJob : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_P(CaptionJob, GivesHFsCaptions) {
  const auto& [model, layout] = GetParam();
  const nlohmann::json reference =
      nlohmann::json::parse(std::ifstream(test_data_dir() / "caption" / (model + ".json")));
  dir_ = fresh_test_dir("shardformer_caption_");
  std::string images;
  for (const auto& image : reference["images"]) {
    images += (images.empty() ? "" : ", ") + quoted(image.get<std::string>());
  }
  for (const std::string prompt : {"", "a photograph of"}) {
    const std::filesystem::path output = dir_ / "captions.jsonl";
    const JobRun run = run_job(
        dir_,
        "[model]\npath = " + quoted((models_dir() / model).string()) +
            "\n[job]\nmode = \"caption\"\n" + layout +
            "\n[caption]\nbatch_size = 2\nmax_new_tokens = " + reference["max_new_tokens"].dump() +
            "\nprompt = " + quoted(prompt) + "\noutput = " + quoted(output.string()) +
            "\nimages = [" + images + "]\n",
        output);
    ASSERT_EQ(run.status, 0) << run.console;
    ASSERT_EQ(run.lines.size(), reference["images"].size()) << run.console;
    size_t checked = 0;
    for (const nlohmann::json& hf : reference["cases"]) {
      if (hf["prompt"] != prompt) continue;
      const size_t image = hf["image"];
      const nlohmann::json& line = run.lines[image];
      EXPECT_EQ(line["image"], reference["images"][image]);
      EXPECT_EQ(line["prompt"], prompt);
      EXPECT_EQ(line["ids"], hf["ids"]) << "image " << image << ", prompt '" << prompt << "'";
      EXPECT_EQ(line["text"], hf["text"]) << "image " << image;
      EXPECT_NE(run.console.find("caption[" + std::to_string(image) + "]: "), std::string::npos);
      ++checked;
    }
    EXPECT_EQ(checked, reference["images"].size());
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, CaptionJob,
                         ::testing::Combine(::testing::Values("tiny-blip2", "tiny-blip2-t5"),
                                            ::testing::Values("", "[parallel]\ntp_size = 2")),
                         [](const auto& info) {
                           std::string name = std::get<0>(info.param) +
                                              (std::get<1>(info.param).empty() ? "_tp1" : "_tp2");
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// A model that writes no text is refused, naming the job mode and the model.
TEST(CaptionJobErrors, AModelWithoutTextIsRefused) {
  const std::filesystem::path dir = fresh_test_dir("shardformer_caption_errors_");
  const JobRun run =
      run_job(dir,
              "[model]\npath = " + quoted((models_dir() / "tiny-vit").string()) +
                  "\n[job]\nmode = \"caption\"\n[caption]\nimages = [" +
                  quoted((test_data_dir() / "images" / "photo.jpg").string()) + "]\n",
              dir / "none.jsonl");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.console.find("job.mode = \"caption\" needs an image-to-text model"),
            std::string::npos)
      << run.console;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace shardformer::testing

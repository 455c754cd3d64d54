// Text in, text out with the real SmolLM2-135M-Instruct (tools/gen_generation_reference.py):
// a chat conversation rendered by its template and answered greedily equals HF's
// apply_chat_template + generate() at tp 1, 2 (heads split unevenly), 3 and pp 2; text prompts
// of different lengths in one batch equal HF's at tp 1, 2 and pp 2; a seeded sampling run
// repeats itself at tp 1 and 3; a stop string ends the answer.
#include "job_run.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using shardformer::testing::models_dir;
using shardformer::testing::quoted;
using shardformer::testing::test_data_dir;

const json& reference() {
  static const json loaded = [] {
    std::ifstream in(test_data_dir() / "generation" / "reference.json");
    if (!in) throw std::runtime_error("run tools/gen_generation_reference.py");
    return json::parse(in);
  }();
  return loaded;
}

class GenerateText : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = shardformer::testing::fresh_test_dir("shardformer_generate_"); }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs a generate job with `parallel` and `generate` TOML lines; returns the output file's
  // JSON lines, and the job's console output in `log`.
  std::vector<json> run(const std::string& parallel, const std::string& generate,
                        std::string* console = nullptr) {
    const fs::path output = dir_ / "out.jsonl";
    const auto job = shardformer::testing::run_job(
        dir_,
        "[model]\npath = " + quoted((models_dir() / "SmolLM2-135M-Instruct").string()) +
            "\n[parallel]\n" + parallel + "\n[job]\nmode = \"generate\"\n" +
            "[generate]\noutput = " + quoted(output.string()) + "\n" + generate,
        output);
    if (console) *console = job.console;
    EXPECT_EQ(job.status, 0) << job.console;
    return job.lines;
  }

  fs::path dir_;
};

std::string chat_messages() {
  std::string toml = "messages = [";
  for (const json& m : reference().at("chat").at("messages")) {
    toml += "{ role = " + quoted(m.at("role")) + ", content = " + quoted(m.at("content")) + " },";
  }
  return toml + "]\n";
}

TEST_F(GenerateText, ChatAnswerEqualsHFAtEveryLayout) {
  const json& chat = reference().at("chat");
  const size_t steps = chat.at("ids").size();
  for (const char* parallel : {"tp_size = 1", "tp_size = 2", "tp_size = 3", "pp_size = 2"}) {
    SCOPED_TRACE(parallel);
    std::string console;
    const auto lines = run(
        parallel, chat_messages() + "max_new_tokens = " + std::to_string(steps) + "\n", &console);
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_EQ(lines[0].at("prompt"), chat.at("prompt"));
    EXPECT_EQ(lines[0].at("prompt_ids"), chat.at("prompt_ids"));
    EXPECT_EQ(lines[0].at("ids"), chat.at("ids"));
    EXPECT_EQ(lines[0].at("text"), chat.at("text"));
    // Streamed to the console as it was decoded.
    EXPECT_NE(console.find(chat.at("text").get<std::string>()), std::string::npos) << console;
  }
}

TEST_F(GenerateText, TextPromptsOfDifferentLengthsEqualHF) {
  const json& texts = reference().at("texts");
  std::string prompts = "prompts = [";
  for (const json& t : texts) prompts += quoted(t.at("prompt")) + ", ";
  for (const char* parallel : {"tp_size = 1", "tp_size = 2", "pp_size = 2"}) {
    SCOPED_TRACE(parallel);
    const auto lines = run(parallel, prompts + "]\nmax_new_tokens = 12\n");
    ASSERT_EQ(lines.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(lines[i].at("prompt_ids"), texts[i].at("prompt_ids")) << i;
      EXPECT_EQ(lines[i].at("ids"), texts[i].at("ids")) << i;
    }
  }
}

TEST_F(GenerateText, SeededSamplingRepeatsAndStopStringsEnd) {
  const std::string sample =
      chat_messages() + "max_new_tokens = 16\ndo_sample = true\ntemperature = 1.3\ntop_p = 0.95\n";
  const auto first = run("tp_size = 1", sample + "seed = 7\n");
  const auto again = run("tp_size = 3", sample + "seed = 7\n");
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(first[0].at("ids"), again[0].at("ids"));
  const auto stopped = run("tp_size = 1", chat_messages() + "stop = [\"France\"]\n");
  ASSERT_EQ(stopped.size(), 1u);
  const std::string text = stopped[0].at("text");
  EXPECT_TRUE(text.ends_with("France")) << text;
}

}  // namespace

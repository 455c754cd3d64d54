// Speech in, text out with the real whisper tiny.en (tools/gen_transcribe_reference.py): three
// espeak-ng sentences in one window each and a 39 s clip window by window give HF's tokens and
// text at tp 1, tp 2, pp 2 and pp 2 x tp 2; the segments' times follow each other; the word
// error rate against the spoken text is printed.
#include "job_run.h"

#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <iostream>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using shardformer::testing::quoted;

const fs::path& speech_dir() {
  static const fs::path dir = shardformer::testing::test_data_dir() / "speech";
  return dir;
}

const json& reference() {
  static const json loaded = [] {
    std::ifstream in(speech_dir() / "reference.json");
    if (!in) throw std::runtime_error("run tools/gen_transcribe_reference.py");
    return json::parse(in);
  }();
  return loaded;
}

class Transcribe : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { dir_ = shardformer::testing::fresh_test_dir("shardformer_transcribe_"); }
  void TearDown() override { fs::remove_all(dir_); }

  // A transcribe job over every reference clip with the `parallel` TOML lines.
  shardformer::testing::JobRun run(const std::string& parallel) {
    std::string audio = "audio = [";
    for (const json& clip : reference().at("clips")) {
      audio += quoted((speech_dir() / clip.at("file").get<std::string>()).string()) + ", ";
    }
    const fs::path output = dir_ / "out.jsonl";
    const fs::path model = shardformer::testing::models_dir() / "whisper-tiny.en";
    return shardformer::testing::run_job(
        dir_,
        "[model]\npath = " + quoted(model.string()) + "\n[parallel]\n" + parallel +
            "\n[job]\nmode = \"transcribe\"\n[transcribe]\n" + audio +
            "]\noutput = " + quoted(output.string()) + "\n",
        output);
  }

  fs::path dir_;
};

TEST_P(Transcribe, TokensAndTextEqualHF) {
  const auto job = run(GetParam());
  ASSERT_EQ(job.status, 0) << job.console;
  const json& clips = reference().at("clips");
  ASSERT_EQ(job.lines.size(), clips.size()) << job.console;
  for (size_t i = 0; i < clips.size(); ++i) {
    const json& clip = clips[i];
    const json& line = job.lines[i];
    SCOPED_TRACE(clip.at("name").get<std::string>());
    EXPECT_EQ(line.at("ids"), clip.at("tokens"));
    EXPECT_EQ(line.at("text"), clip.at("text"));
    // Printed without the tokenizer's leading space.
    const std::string text = clip.at("text");
    EXPECT_NE(job.console.find("transcript[" + std::to_string(i) + "]: " + text.substr(1)),
              std::string::npos)
        << job.console;
    double last_end = 0;
    for (const json& segment : line.at("segments")) {
      EXPECT_GE(segment.at("start").get<double>(), last_end - 1e-9) << segment.dump();
      EXPECT_GE(segment.at("end").get<double>(), segment.at("start").get<double>());
      last_end = segment.at("end");
    }
    std::cout << clip.at("name").get<std::string>() << ": " << clip.at("seconds") << " s, "
              << line.at("segments").size() << " segments, word error rate " << clip.at("wer")
              << "\n";
  }
  // The long clip needed more than one window: its segments go past 30 s.
  EXPECT_GT(job.lines.back().at("segments").back().at("end").get<double>(), 30.0);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, Transcribe,
    ::testing::Values("tp_size = 1", "tp_size = 2", "pp_size = 2", "pp_size = 2\ntp_size = 2"),
    [](const auto& info) {
      return std::string(std::array{"tp1", "tp2", "pp2", "pp2_tp2"}[info.index]);
    });

}  // namespace

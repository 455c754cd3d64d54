// Transcription's bookkeeping without a model: the prompt a generation_config.json gives
// (multilingual language and task, English-only models, forced_decoder_ids), and the long-form
// loop driven by scripted windows: where each window starts, its padding, the segments' times
// and tokens as HF's _retrieve_segment cuts them.
#include "shardformer/audio/transcription.h"
#include "shardformer/error.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace shardformer::audio {
namespace {

using testing::expect_error;

class TranscriptionSettingsTest : public testing::TempDirTest<> {
 protected:
  TranscriptionSettings read(const nlohmann::json& config, std::optional<std::string> language,
                             std::optional<std::string> task = std::nullopt) {
    std::ofstream(dir_ / "generation_config.json") << config.dump();
    return TranscriptionSettings::from_folder(dir_, GenerationConfig{}, language, task, 448,
                                              "job.toml");
  }

  static nlohmann::json multilingual() {
    return {{"decoder_start_token_id", 50258},
            {"no_timestamps_token_id", 50363},
            {"is_multilingual", true},
            {"lang_to_id", {{"<|en|>", 50259}, {"<|de|>", 50261}}},
            {"task_to_id", {{"transcribe", 50359}, {"translate", 50358}}},
            {"max_initial_timestamp_index", 50}};
  }
};

TEST_F(TranscriptionSettingsTest, AMultilingualPromptNamesTheLanguageAndTask) {
  EXPECT_EQ(read(multilingual(), "de").init_tokens, (std::vector<int64_t>{50258, 50261, 50359}));
  EXPECT_EQ(read(multilingual(), "<|en|>", "translate").init_tokens,
            (std::vector<int64_t>{50258, 50259, 50358}));
  const TranscriptionSettings s = read(multilingual(), "en");
  EXPECT_EQ(s.no_timestamps_token_id, 50363);
  EXPECT_EQ(s.max_initial_timestamp_index, 50);
  EXPECT_EQ(s.max_length, 448);
}

TEST_F(TranscriptionSettingsTest, LanguagesAndTasksTheModelDoesNotTakeAreRefused) {
  expect_error<ConfigError>([&] { read(multilingual(), std::nullopt); },
                            {"job.toml: language: the model is multilingual"});
  expect_error<ConfigError>([&] { read(multilingual(), "xx"); },
                            {"job.toml: language 'xx' is not one the model knows", "<|de|>"});
  nlohmann::json english = multilingual();
  english["is_multilingual"] = false;
  expect_error<ConfigError>([&] { read(english, std::nullopt, "translate"); },
                            {"job.toml: task: the model is English-only"});
}

TEST_F(TranscriptionSettingsTest, ForcedDecoderIdsMustBeThePromptBuilt) {
  nlohmann::json config = multilingual();
  config["forced_decoder_ids"] = {{1, 50261}, {2, 50359}, {3, 50363}};
  EXPECT_EQ(read(config, "de").init_tokens, (std::vector<int64_t>{50258, 50261, 50359}));
  expect_error<CheckpointError>([&] { read(config, "en"); },
                                {"forced_decoder_ids: [1,50261] differs from the prompt"});
  config.erase("no_timestamps_token_id");
  expect_error<CheckpointError>([&] { read(config, "de"); }, {"no_timestamps_token_id is missing"});
}

// English-only settings: <|startoftranscript|> 50257, timestamps from 50363.
TranscriptionSettings english_settings() {
  TranscriptionSettings s;
  s.init_tokens = {50257};
  s.no_timestamps_token_id = 50362;
  s.generation.eos_token_id = 50256;
  return s;
}

constexpr int64_t kBegin = 50363;  // <|0.00|>

// A decoder that answers window after window with `answers`, recording what it was given.
struct ScriptedDecoder {
  std::vector<std::vector<int64_t>> answers;
  std::vector<at::Tensor> features{};
  std::vector<GenerationConfig> configs{};

  GenerationResult operator()(const at::Tensor& input, const GenerationConfig& config) {
    features.push_back(input);
    configs.push_back(config);
    GenerationResult result;
    result.new_tokens = {answers.at(features.size() - 1)};
    result.new_tokens[0].push_back(50256);  // eos
    return result;
  }
};

TEST(Transcription, ShortAudioIsOneWindowWithoutTimestamps) {
  ScriptedDecoder decoder{.answers = {{10, 11, 12}}};
  const Transcript t = transcribe(std::vector<float>(16000, 0.1f), LogMelOptions{},
                                  english_settings(), std::ref(decoder));
  ASSERT_EQ(decoder.configs.size(), 1u);
  EXPECT_EQ(decoder.configs[0].decoder_prompt, (std::vector<int64_t>{50257, 50362}));
  EXPECT_FALSE(decoder.configs[0].sampling.timestamps.has_value());
  EXPECT_EQ(decoder.configs[0].max_new_tokens, 446);
  EXPECT_EQ(decoder.features[0].sizes(), (std::vector<int64_t>{1, 80, 3000}));
  EXPECT_EQ(t.tokens, (std::vector<int64_t>{10, 11, 12}));
  ASSERT_EQ(t.segments.size(), 1u);
  EXPECT_DOUBLE_EQ(t.segments[0].end, 30.0);
}

TEST(Transcription, LongAudioSeeksToTheLastCompleteSegment) {
  // 45 s: window 1 ends inside a segment (seek to its last pair, 2 s); window 2 ends with a lone
  // timestamp (the whole window consumed); window 3 holds the last 13 s and no timestamp.
  ScriptedDecoder decoder{.answers = {{kBegin, 10, 11, kBegin + 100, kBegin + 100, 12, 13},
                                      {kBegin, 14, kBegin + 50},
                                      {15}}};
  const Transcript t = transcribe(std::vector<float>(45 * 16000, 0.0f), LogMelOptions{},
                                  english_settings(), std::ref(decoder));
  ASSERT_EQ(t.windows, 3);
  for (const GenerationConfig& c : decoder.configs) {
    EXPECT_EQ(c.decoder_prompt, std::vector<int64_t>{50257});
    ASSERT_TRUE(c.sampling.timestamps.has_value());
    EXPECT_EQ(c.sampling.timestamps->timestamp_begin(), kBegin);
    EXPECT_EQ(c.max_new_tokens, 447);
  }
  // The silent audio's features are -1.5 everywhere; the last window is padded with zeros
  // after its 1300 frames (45 s - 2 s - 30 s).
  const at::Tensor last = decoder.features[2][0];  // [80, 3000]
  EXPECT_TRUE(at::allclose(last.narrow(1, 0, 1300), at::full({80, 1300}, -1.5)));
  EXPECT_TRUE(at::equal(last.narrow(1, 1300, 1700), at::zeros({80, 1700})));
  EXPECT_EQ(t.tokens, (std::vector<int64_t>{kBegin, 10, 11, kBegin + 100, kBegin + 100, kBegin, 14,
                                            kBegin + 50, 15}));
  ASSERT_EQ(t.segments.size(), 3u);
  EXPECT_DOUBLE_EQ(t.segments[0].start, 0.0);
  EXPECT_DOUBLE_EQ(t.segments[0].end, 2.0);
  EXPECT_DOUBLE_EQ(t.segments[1].start, 2.0);
  EXPECT_DOUBLE_EQ(t.segments[1].end, 3.0);
  EXPECT_DOUBLE_EQ(t.segments[2].start, 32.0);
  EXPECT_DOUBLE_EQ(t.segments[2].end, 45.0);
  EXPECT_EQ(text_tokens(t.tokens, english_settings()), (std::vector<int64_t>{10, 11, 14, 15}));
}

}  // namespace
}  // namespace shardformer::audio

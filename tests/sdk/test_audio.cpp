// The audio front end against HF: files read with libsndfile (PCM16 WAV, mono and stereo),
// mixed to mono, resampled to 16 kHz with libsoxr, and Whisper's log-mel features (80 and 128
// bins) equal to HF's WhisperFeatureExtractor on tones, silence, clipping, noise shorter than a
// second, 35 s (cut at 30), 8 kHz and 44.1 kHz stereo (tools/gen_audio_references.py) and on
// espeak-ng speech, short and 39 s long; files that are not (whole) audio refused naming the file.
#include "shardformer/audio/audio.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "test_env.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

namespace shardformer::audio {
namespace {

std::filesystem::path audio_dir() { return testing::test_data_dir() / "audio"; }

const SafetensorsFile& audio_reference() {
  static const SafetensorsFile file(audio_dir() / "reference.safetensors");
  return file;
}

at::Tensor expected_tensor(const std::string& name) { return audio_reference().read(name); }

// The 16 kHz mono samples the file gives after mixing and resampling.
std::vector<float> samples_of(const std::string& name) {
  const Waveform wave = read_audio(audio_dir() / (name + ".wav"));
  return resample(wave.samples, wave.sample_rate, 16000);
}

class AudioFiles : public ::testing::TestWithParam<std::string> {};

TEST_P(AudioFiles, GiveHFsSamplesAndLogMelFeatures) {
  const std::string& name = GetParam();
  const std::vector<float> samples = samples_of(name);
  const at::Tensor expected_samples = expected_tensor("samples." + name);
  ASSERT_EQ(static_cast<int64_t>(samples.size()), expected_samples.numel()) << name;
  const at::Tensor ours_samples = at::tensor(samples);
  EXPECT_LE((ours_samples - expected_samples).abs().max().item<double>(), 1e-6) << name;

  const at::Tensor features = log_mel_spectrogram(samples, LogMelOptions{});
  const at::Tensor expected = expected_tensor("features." + name);
  ASSERT_EQ(features.sizes(), expected.sizes()) << name;
  EXPECT_LE((features - expected).abs().max().item<double>(), 1e-4) << name;
}

INSTANTIATE_TEST_SUITE_P(Reference, AudioFiles,
                         ::testing::Values("tone_16k", "silence_16k", "clipped_16k",
                                           "short_noise_16k", "long_35s_16k", "tone_8k",
                                           "stereo_44k"));

// Real speech (espeak-ng, tools/make_speech.py): HF's features for three sentences (one padded
// window each) and for a 39 s clip whole, as long-form transcription takes them
// (tools/gen_transcribe_reference.py).
TEST(LogMel, EqualsHFOnSpeechShortAndWhole) {
  const std::filesystem::path speech = testing::test_data_dir() / "speech";
  const SafetensorsFile hf(speech / "features.safetensors");
  for (const std::string name : {"s1", "s2", "s3", "long"}) {
    const Waveform wave = read_audio(speech / (name + ".wav"));
    ASSERT_EQ(wave.sample_rate, 16000) << name;
    const at::Tensor expected = hf.read(name);
    const at::Tensor features = name == "long"
                                    ? whole_log_mel_spectrogram(wave.samples, LogMelOptions{})
                                    : log_mel_spectrogram(wave.samples, LogMelOptions{});
    ASSERT_EQ(features.sizes(), expected.sizes()) << name;
    EXPECT_LE((features - expected).abs().max().item<double>(), 1e-4) << name;
  }
}

TEST(LogMel, OneHundredTwentyEightBinsAsLargeV3) {
  LogMelOptions options;
  options.feature_size = 128;
  const at::Tensor features = log_mel_spectrogram(samples_of("tone_16k"), options);
  const at::Tensor expected = expected_tensor("features128.tone_16k");
  ASSERT_EQ(features.sizes(), expected.sizes());
  EXPECT_LE((features - expected).abs().max().item<double>(), 1e-4);
}

TEST(LogMel, ReadsPreprocessorConfigAndRefusesDither) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("shardformer-audio-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  std::ofstream(folder / "preprocessor_config.json")
      << R"({"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128,
             "sampling_rate": 16000, "hop_length": 160, "n_fft": 400, "chunk_length": 30,
             "n_samples": 480000, "nb_max_frames": 3000, "padding_side": "right",
             "padding_value": 0.0, "processor_class": "WhisperProcessor",
             "return_attention_mask": false})";
  const LogMelOptions options = LogMelOptions::from_folder(folder);
  EXPECT_EQ(options.feature_size, 128);
  EXPECT_EQ(options.frames(), 3000);
  std::ofstream(folder / "preprocessor_config.json") << R"({"dither": 1e-5})";
  try {
    LogMelOptions::from_folder(folder);
    ADD_FAILURE() << "dither was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("dither"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(folder);
}

// Each broken file is refused with a ConfigError naming it.
TEST(AudioFiles, ThatAreNotWholeAudioAreRefusedNamingTheFile) {
  for (const std::string name :
       {"not_audio.wav", "truncated.wav", "bad_header.wav", "missing.wav"}) {
    const std::filesystem::path path = audio_dir() / name;
    try {
      read_audio(path);
      ADD_FAILURE() << name << " was read";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace shardformer::audio

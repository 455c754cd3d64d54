// The transcribe job: audio files in, text out, with a Whisper model as HF's generate() runs it
// (audio::transcribe); rank 0 prints each file's text and writes text, ids and timed segments
// to a JSON lines file.
#include "job_modes.h"
#include "output_file.h"

#include "shardformer/audio/transcription.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace shardformer::host {
namespace {

namespace fs = std::filesystem;
using tokenizer::Tokenizer;

// Every file read and resampled before the first is transcribed: a bad file fails the job at
// once, naming its key.
std::vector<std::vector<float>> read_all(const JobConfig& config, int64_t sampling_rate) {
  std::vector<std::vector<float>> audio;
  for (size_t i = 0; i < config.transcribe.audio.size(); ++i) {
    try {
      const audio::Waveform wave = audio::read_audio(config.transcribe.audio[i]);
      audio.push_back(audio::resample(wave.samples, wave.sample_rate, sampling_rate));
    } catch (const ConfigError& e) {
      throw ConfigError(str(config.source.string(), ": transcribe.audio[", i, "]: ", e.what()));
    }
  }
  return audio;
}

std::string trimmed(const std::string& text) {
  const size_t first = text.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : text.substr(first);
}

}  // namespace

void run_transcribe(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const TranscribeSection& t = config.transcribe;
  const fs::path folder = session.checkpoint().directory();
  if (!session.model().is_encoder_decoder() || !fs::exists(folder / "preprocessor_config.json")) {
    throw ConfigError(str(config.source.string(),
                          ": job.mode = \"transcribe\" needs a speech "
                          "model (Whisper) with a feature extractor; ",
                          session.architecture(), " in '", folder.string(), "' has ",
                          session.model().is_encoder_decoder() ? "no preprocessor_config.json"
                                                               : "no decoder of text"));
  }
  if (!fs::exists(folder / "tokenizer.json")) {
    throw ConfigError(str(config.source.string(), ": transcribe: '", folder.string(),
                          "' has no tokenizer.json to turn the ids into text"));
  }
  if (!t.output.empty()) check_output_path(config, t.output, "transcribe.output");
  const Tokenizer tok = Tokenizer::from_file(folder);
  const audio::LogMelOptions mel = audio::LogMelOptions::from_folder(folder);
  const audio::TranscriptionSettings settings = audio::TranscriptionSettings::from_folder(
      folder,
      session.generation_config(0, std::nullopt, std::nullopt,
                                audio::TranscriptionSettings::keys()),
      t.language, t.task, session.checkpoint().config().get_int("max_target_positions"),
      config.source.string());
  const std::vector<std::vector<float>> audio = read_all(config, mel.sampling_rate);

  OutputFile file(t.output, writer);
  double audio_seconds = 0;
  int64_t windows = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < audio.size(); ++i) {
    const audio::Transcript transcript = audio::transcribe(
        audio[i], mel, settings, [&](const at::Tensor& features, const GenerationConfig& g) {
          return session.generate_from_features(features, g);
        });
    audio_seconds += static_cast<double>(audio[i].size()) / static_cast<double>(mel.sampling_rate);
    windows += transcript.windows;
    if (!writer) continue;
    const std::string text = tok.decode(audio::text_tokens(transcript.tokens, settings));
    out << "transcript[" << i << "]: " << trimmed(text) << std::endl;
    if (!file.is_open()) continue;
    nlohmann::ordered_json line;
    line["audio"] = t.audio[i].string();
    line["text"] = text;
    line["ids"] = transcript.tokens;
    line["segments"] = nlohmann::ordered_json::array();
    for (const audio::TranscriptSegment& s : transcript.segments) {
      line["segments"].push_back({{"start", s.start},
                                  {"end", s.end},
                                  {"text", tok.decode(audio::text_tokens(s.tokens, settings))}});
    }
    file.write_line(line.dump());
  }
  const double elapsed = seconds_since(start);
  file.commit();
  log::info(str("transcribe: ", audio.size(), " files, ", audio_seconds, " s of audio in ", windows,
                " windows, ", elapsed, " s (real-time factor ",
                elapsed / std::max(audio_seconds, 1e-9), ")"));
}

}  // namespace shardformer::host

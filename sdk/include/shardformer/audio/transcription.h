// Speech to text as HF's WhisperForConditionalGeneration.generate() does it: the decoder prompt
// from generation_config.json, audio up to 30 s in one window without timestamps, longer audio
// window after window, each window's timestamps saying where the next one starts.
#pragma once

#include "shardformer/audio/audio.h"
#include "shardformer/generation.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace shardformer::audio {

// What a model folder's generation_config.json says about transcription, with the job's
// language and task.
struct TranscriptionSettings {
  // <|startoftranscript|>, then a multilingual model's <|language|> and <|task|>.
  std::vector<int64_t> init_tokens;
  int64_t no_timestamps_token_id = -1;
  std::optional<int64_t> max_initial_timestamp_index;
  bool return_timestamps = false;  // also for audio that fits in one window
  int64_t max_length = 448;        // a window's decoder tokens, its prompt included
  int64_t max_target_positions = 448;
  // eos, pad and the suppressed tokens (Session::generation_config with keys()).
  GenerationConfig generation;

  // The generation_config.json keys read here rather than by apply_generation_config_file.
  static const std::set<std::string>& keys();
  // Reads `folder`/generation_config.json. `language` ("en" or "<|en|>") and `task`
  // ("transcribe" or "translate") are for multilingual models; `origin` names where they came
  // from in errors. Throws CheckpointError naming the file and key for a missing or malformed
  // key, ConfigError naming `origin` for a language or task the model does not know.
  static TranscriptionSettings from_folder(const std::filesystem::path& folder,
                                           GenerationConfig generation,
                                           const std::optional<std::string>& language,
                                           const std::optional<std::string>& task,
                                           int64_t max_target_positions, const std::string& origin);
};

// Text between two timestamps (or a whole window without them), in seconds from the start.
struct TranscriptSegment {
  double start = 0;
  double end = 0;
  std::vector<int64_t> tokens;  // timestamp tokens included
};

struct Transcript {
  std::vector<int64_t> tokens;  // every segment's, in order
  std::vector<TranscriptSegment> segments;
  int64_t windows = 0;  // decoder runs
};

// Decodes one window: input_features [1, mels, frames] → the generation result.
using WindowDecoder =
    std::function<GenerationResult(const at::Tensor& input_features, const GenerationConfig&)>;

// Transcribes `samples` (mono, at options.sampling_rate) greedily, as HF's generate() does for
// one audio: up to one window without timestamps unless settings.return_timestamps; longer
// audio with timestamps, each window starting where the last complete segment ended.
Transcript transcribe(const std::vector<float>& samples, const LogMelOptions& options,
                      const TranscriptionSettings& settings, const WindowDecoder& decode);

// `tokens` without timestamps: what a tokenizer decodes to text.
std::vector<int64_t> text_tokens(const std::vector<int64_t>& tokens,
                                 const TranscriptionSettings& settings);

}  // namespace shardformer::audio

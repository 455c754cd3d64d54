// Whisper transcription as HF's generate(): the prompt from generation_config.json, the
// suppressed tokens and timestamp rules, and the sequential long-form loop that cuts each
// window's output into segments and seeks to the last complete one.
#include "shardformer/audio/transcription.h"

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>

namespace shardformer::audio {
namespace {

// Seconds per encoder position (the convolutions halve the 10 ms mel frames), as HF's
// time_precision, and mel frames per position (its input_stride).
constexpr double kTimePrecision = 0.02;
constexpr int64_t kInputStride = 2;
constexpr double kSecondsPerFrame = 0.01;

// HF's _retrieve_segment: `tokens` (a window's new tokens, without eos) cut after each pair of
// timestamps; returns the segments and how many mel frames the window consumed.
std::pair<std::vector<TranscriptSegment>, int64_t> window_segments(
    const std::vector<int64_t>& tokens, int64_t begin, double offset, int64_t window_frames) {
  const auto is_timestamp = [&](size_t i) { return tokens[i] >= begin; };
  const size_t n = tokens.size();
  const bool single_timestamp_ending = n >= 2 && !is_timestamp(n - 2) && is_timestamp(n - 1);
  std::vector<size_t> slices;  // ends of the segments: after each consecutive timestamp pair
  for (size_t i = 0; i + 1 < n; ++i) {
    if (is_timestamp(i) && is_timestamp(i + 1)) slices.push_back(i + 1);
  }
  const auto seconds = [&](int64_t id) { return offset + (id - begin) * kTimePrecision; };
  std::vector<TranscriptSegment> segments;
  if (slices.empty()) {
    // One segment, ending at the window's end or at its last timestamp when that is not 0.
    double end = offset + static_cast<double>(window_frames) * kSecondsPerFrame;
    for (size_t i = n; i-- > 0;) {
      if (!is_timestamp(i)) continue;
      if (tokens[i] != begin) end = seconds(tokens[i]);
      break;
    }
    segments.push_back({offset, end, tokens});
    return {segments, window_frames};
  }
  if (single_timestamp_ending) {
    slices.push_back(n);
  } else {
    slices.back() += 1;  // the last segment keeps its closing timestamp
  }
  size_t last = 0;
  for (size_t s = 0; s < slices.size(); ++s) {
    const std::vector<int64_t> piece(tokens.begin() + static_cast<int64_t>(last),
                                     tokens.begin() + static_cast<int64_t>(slices[s]));
    const bool last_slice = s + 1 == slices.size();
    const int64_t closing =
        !last_slice || single_timestamp_ending ? piece.back() : piece[piece.size() - 2];
    segments.push_back({seconds(piece.front()), seconds(closing), piece});
    last = slices[s];
  }
  if (single_timestamp_ending) return {segments, window_frames};
  // The window ended inside a segment: the next one starts at the last complete segment's end.
  return {segments, (tokens[last - 2] - begin) * kInputStride};
}

int64_t int_key(const nlohmann::json& json, const std::filesystem::path& path,
                const std::string& key) {
  if (!json.contains(key)) {
    throw CheckpointError(str(path.string(), ": ", key,
                              " is missing (Whisper's generation "
                              "config names it)"));
  }
  return detail::json_integer(json, path, key);
}

// A multilingual model's id for `name` in `table` (lang_to_id / task_to_id), whose keys are
// "<|en|>" or "transcribe".
int64_t lookup_id(const nlohmann::json& table, const std::filesystem::path& path,
                  const std::string& table_key, const std::string& name, bool bracketed,
                  const std::string& origin, const std::string& what) {
  if (!table.is_object()) {
    throw CheckpointError(str(path.string(), ": ", table_key, ": expected an object"));
  }
  const std::string key = bracketed && !name.starts_with("<|") ? str("<|", name, "|>") : name;
  if (!table.contains(key) || !table[key].is_number_integer()) {
    std::vector<std::string> known;
    for (const auto& [k, v] : table.items()) known.push_back(k);
    throw ConfigError(str(origin, ": ", what, " '", name, "' is not one the model knows (",
                          path.string(), " ", table_key, ": ", join(known, ", "), ")"));
  }
  return table[key].get<int64_t>();
}

}  // namespace

const std::set<std::string>& TranscriptionSettings::keys() {
  static const std::set<std::string> kKeys = {"no_timestamps_token_id",
                                              "max_initial_timestamp_index",
                                              "is_multilingual",
                                              "lang_to_id",
                                              "task_to_id",
                                              "forced_decoder_ids",
                                              "return_timestamps",
                                              "max_length",
                                              "alignment_heads",
                                              "prev_sot_token_id",
                                              "decoder_start_token_id"};
  return kKeys;
}

TranscriptionSettings TranscriptionSettings::from_folder(const std::filesystem::path& folder,
                                                         GenerationConfig generation,
                                                         const std::optional<std::string>& language,
                                                         const std::optional<std::string>& task,
                                                         int64_t max_target_positions,
                                                         const std::string& origin) {
  const std::filesystem::path path = folder / "generation_config.json";
  if (!std::filesystem::exists(path)) {
    throw CheckpointError(str(path.string(),
                              " is missing: transcription reads Whisper's "
                              "prompt and timestamp tokens from it"));
  }
  const nlohmann::json json = detail::read_json_file(path);
  TranscriptionSettings s;
  s.generation = std::move(generation);
  s.max_target_positions = max_target_positions;
  s.init_tokens = {int_key(json, path, "decoder_start_token_id")};
  s.no_timestamps_token_id = int_key(json, path, "no_timestamps_token_id");
  if (json.contains("max_initial_timestamp_index") &&
      !json["max_initial_timestamp_index"].is_null()) {
    s.max_initial_timestamp_index = int_key(json, path, "max_initial_timestamp_index");
  }
  if (json.contains("max_length") && !json["max_length"].is_null()) {
    s.max_length = int_key(json, path, "max_length");
  }
  if (json.contains("return_timestamps") && !json["return_timestamps"].is_null()) {
    if (!json["return_timestamps"].is_boolean()) {
      throw CheckpointError(str(path.string(), ": return_timestamps: expected a boolean"));
    }
    s.return_timestamps = json["return_timestamps"].get<bool>();
  }
  const bool multilingual = json.value("is_multilingual", false);
  if (multilingual) {
    if (!language) {
      throw ConfigError(str(origin,
                            ": language: the model is multilingual; name the spoken "
                            "language (language detection is not implemented)"));
    }
    s.init_tokens.push_back(lookup_id(json.value("lang_to_id", nlohmann::json()), path,
                                      "lang_to_id", *language, true, origin, "language"));
    s.init_tokens.push_back(lookup_id(json.value("task_to_id", nlohmann::json()), path,
                                      "task_to_id", task.value_or("transcribe"), false, origin,
                                      "task"));
  } else if (language || task) {
    throw ConfigError(str(origin, ": ", language ? "language" : "task",
                          ": the model is English-only (", path.string(),
                          ": is_multilingual is not true); remove the key"));
  }
  // Older configs force the prompt after <|startoftranscript|>; it must be the one built here.
  if (json.contains("forced_decoder_ids") && !json["forced_decoder_ids"].is_null()) {
    std::vector<int64_t> prompt = s.init_tokens;
    prompt.push_back(s.no_timestamps_token_id);
    for (const auto& pair : json["forced_decoder_ids"]) {
      const bool ok = pair.is_array() && pair.size() == 2 && pair[0].is_number_integer() &&
                      (pair[1].is_number_integer() || pair[1].is_null());
      if (!ok) {
        throw CheckpointError(
            str(path.string(), ": forced_decoder_ids: expected [position, id] pairs"));
      }
      const auto position = pair[0].get<int64_t>();
      if (pair[1].is_null() || position < 1 || position >= static_cast<int64_t>(prompt.size()) ||
          pair[1].get<int64_t>() != prompt[position]) {
        throw CheckpointError(str(path.string(), ": forced_decoder_ids: ", pair.dump(),
                                  " differs from the prompt ", join(prompt, " "),
                                  " built from the language, task and timestamp settings"));
      }
    }
  }
  return s;
}

Transcript transcribe(const std::vector<float>& samples, const LogMelOptions& options,
                      const TranscriptionSettings& settings, const WindowDecoder& decode) {
  const bool long_form = static_cast<int64_t>(samples.size()) > options.samples();
  const bool timestamps = long_form || settings.return_timestamps;
  const int64_t window = options.frames();
  const at::Tensor features = whole_log_mel_spectrogram(samples, options);  // [mels, frames]
  const int64_t total = long_form ? features.size(1) : window;
  std::vector<int64_t> prompt = settings.init_tokens;
  if (!timestamps) prompt.push_back(settings.no_timestamps_token_id);
  const auto prompt_length = static_cast<int64_t>(prompt.size());
  GenerationConfig config = settings.generation;
  config.decoder_prompt = prompt;
  config.max_new_tokens =
      std::min(settings.max_length, settings.max_target_positions) - prompt_length;
  if (config.max_new_tokens < 1) {
    throw ConfigError(str("transcription: the decoder prompt (", prompt_length,
                          " tokens) leaves no room in max_length ", settings.max_length));
  }
  if (timestamps) {
    config.sampling.timestamps =
        TimestampRules{.no_timestamps_token_id = settings.no_timestamps_token_id,
                       .eos_token_id = config.eos_token_id.value_or(settings.init_tokens.front()),
                       .max_initial_timestamp_index = settings.max_initial_timestamp_index};
  }
  Transcript transcript;
  for (int64_t seek = 0; seek < total;) {
    const int64_t frames = std::min(total - seek, window);
    at::Tensor input = at::zeros({features.size(0), window}, features.options());
    input.narrow(1, 0, frames).copy_(features.narrow(1, seek, frames));
    const GenerationResult result = decode(input.unsqueeze(0), config);  // [1, mels, window]
    ++transcript.windows;
    std::vector<int64_t> tokens = result.new_tokens.at(0);
    if (!tokens.empty() && config.is_eos(tokens.back())) tokens.pop_back();
    const double offset = static_cast<double>(seek) * kTimePrecision / kInputStride;
    auto [segments, consumed] =
        window_segments(tokens, settings.no_timestamps_token_id + 1, offset, frames);
    for (TranscriptSegment& segment : segments) {
      transcript.tokens.insert(transcript.tokens.end(), segment.tokens.begin(),
                               segment.tokens.end());
      transcript.segments.push_back(std::move(segment));
    }
    if (consumed <= 0) consumed = frames;  // a window must move on
    seek += consumed;
  }
  return transcript;
}

std::vector<int64_t> text_tokens(const std::vector<int64_t>& tokens,
                                 const TranscriptionSettings& settings) {
  std::vector<int64_t> text;
  std::copy_if(tokens.begin(), tokens.end(), std::back_inserter(text),
               [&](int64_t id) { return id <= settings.no_timestamps_token_id; });
  return text;
}

}  // namespace shardformer::audio

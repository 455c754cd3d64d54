// Audio for speech models: files read with libsndfile and mixed to mono, resampled with libsoxr,
// and Whisper's log-mel spectrogram as HF's WhisperFeatureExtractor computes it (LibTorch's STFT).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace shardformer::audio {

// Mono samples in [-1, 1] at sample_rate.
struct Waveform {
  std::vector<float> samples;
  int64_t sample_rate = 0;
};

// Reads `path` in any format libsndfile reads (WAV, FLAC, Ogg Vorbis / Opus, MP3, AIFF, ...),
// its channels mixed to mono by their mean. Throws ConfigError naming the file for a missing,
// unreadable, truncated or empty one, or one that is not audio.
Waveform read_audio(const std::filesystem::path& path);

// `samples` at from_rate resampled to to_rate with libsoxr's high quality (SOXR_HQ, as the PyPI
// soxr package's default); the same samples when the rates are equal.
std::vector<float> resample(const std::vector<float>& samples, int64_t from_rate, int64_t to_rate);

// WhisperFeatureExtractor's settings (preprocessor_config.json).
struct LogMelOptions {
  int64_t feature_size = 80;  // mel bins (80, or 128 for large-v3)
  int64_t sampling_rate = 16000;
  int64_t hop_length = 160;
  int64_t n_fft = 400;
  int64_t chunk_length = 30;  // seconds a window holds
  int64_t samples() const { return chunk_length * sampling_rate; }
  int64_t frames() const { return samples() / hop_length; }

  // The folder's preprocessor_config.json (defaults without one). Throws CheckpointError naming a
  // key that would change the features and is not supported (dither, another extractor).
  static LogMelOptions from_folder(const std::filesystem::path& folder);
};

// HF's mel_filter_bank(1 + n_fft / 2, feature_size, 0 Hz, 8000 Hz, sampling_rate, slaney norm,
// slaney scale): [n_fft / 2 + 1, feature_size] fp32.
at::Tensor mel_filter_bank(const LogMelOptions& options);

// The log-mel features of one window [feature_size, frames()]: `samples` (mono, at
// options.sampling_rate) zero-padded or cut to chunk_length seconds, a centred Hann STFT, power
// through the mel filters, log10 clamped at 1e-10, floored 8 below the maximum, then (x + 4) / 4.
at::Tensor log_mel_spectrogram(const std::vector<float>& samples, const LogMelOptions& options);

// The features of audio longer than a window, whole [feature_size, samples / hop_length] (HF's
// extractor with truncation=False, padding="longest": one maximum floors every frame); one
// window as log_mel_spectrogram() for audio that fits in one.
at::Tensor whole_log_mel_spectrogram(const std::vector<float>& samples,
                                     const LogMelOptions& options);

}  // namespace shardformer::audio

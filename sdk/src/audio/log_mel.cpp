// Whisper's log-mel spectrogram and its settings, as HF's WhisperFeatureExtractor computes them.
#include "shardformer/audio/audio.h"

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace shardformer::audio {

LogMelOptions LogMelOptions::from_folder(const std::filesystem::path& folder) {
  LogMelOptions options;
  const std::filesystem::path path = folder / "preprocessor_config.json";
  if (!std::filesystem::exists(path)) return options;
  const nlohmann::json json = detail::read_json_file(path);
  const auto fail = [&](const std::string& key, const std::string& what) {
    throw CheckpointError(str(path.string(), ": ", key, ": ", what));
  };
  const auto positive = [&](const std::string& key) {
    if (!json[key].is_number_integer() || json[key].get<int64_t>() <= 0) {
      fail(key, "expected a positive integer");
    }
    return json[key].get<int64_t>();
  };
  // Keys that follow from the others, name the processor, or set padding the extractor's
  // defaults already give (zeros on the right, no attention mask).
  static const std::set<std::string> kNoEffect = {"n_samples", "nb_max_frames", "processor_class",
                                                  "padding_side", "return_attention_mask"};
  for (const auto& [key, value] : json.items()) {
    if (value.is_null() || kNoEffect.contains(key)) continue;
    if (key == "feature_size") {
      options.feature_size = positive(key);
    } else if (key == "sampling_rate") {
      options.sampling_rate = positive(key);
    } else if (key == "hop_length") {
      options.hop_length = positive(key);
    } else if (key == "n_fft") {
      options.n_fft = positive(key);
    } else if (key == "chunk_length") {
      options.chunk_length = positive(key);
    } else if (key == "feature_extractor_type") {
      if (value != "WhisperFeatureExtractor")
        fail(key, "only WhisperFeatureExtractor is supported");
    } else if (key == "padding_value") {
      if (!value.is_number() || value.get<double>() != 0.0) fail(key, "only 0.0 is supported");
    } else if (key == "dither") {
      if (!value.is_number() || value.get<double>() != 0.0) {
        fail(key, "dithering (random noise added to the audio) is not supported; set it to 0.0");
      }
    } else {
      fail(key, "is not a WhisperFeatureExtractor setting this host knows");
    }
  }
  return options;
}

namespace {

// HF's slaney mel scale (librosa's): linear below 1 kHz, logarithmic above.
double hertz_to_mel(double hz) {
  const double logstep = 27.0 / std::log(6.4);
  return hz >= 1000.0 ? 15.0 + std::log(hz / 1000.0) * logstep : 3.0 * hz / 200.0;
}

double mel_to_hertz(double mel) {
  const double logstep = std::log(6.4) / 27.0;
  return mel >= 15.0 ? 1000.0 * std::exp(logstep * (mel - 15.0)) : 200.0 * mel / 3.0;
}

}  // namespace

at::Tensor mel_filter_bank(const LogMelOptions& o) {
  const int64_t bins = 1 + o.n_fft / 2, mels = o.feature_size;
  const double mel_min = hertz_to_mel(0.0), mel_max = hertz_to_mel(8000.0);
  std::vector<double> filter_freqs(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {  // np.linspace over mels, back to hertz
    filter_freqs[i] = mel_to_hertz(mel_min + (mel_max - mel_min) * static_cast<double>(i) /
                                                 static_cast<double>(mels + 1));
  }
  at::Tensor bank = at::empty({bins, mels}, at::kFloat);
  auto b = bank.accessor<float, 2>();
  const double top = static_cast<double>(o.sampling_rate / 2);
  for (int64_t f = 0; f < bins; ++f) {
    const double hz = top * static_cast<double>(f) / static_cast<double>(bins - 1);
    for (int64_t m = 0; m < mels; ++m) {
      const double down = (hz - filter_freqs[m]) / (filter_freqs[m + 1] - filter_freqs[m]);
      const double up = (filter_freqs[m + 2] - hz) / (filter_freqs[m + 2] - filter_freqs[m + 1]);
      // The triangle in fp32 as HF stores it, then its slaney area normalisation.
      const auto triangle = static_cast<float>(std::max(0.0, std::min(down, up)));
      const double norm = 2.0 / (filter_freqs[m + 2] - filter_freqs[m]);
      b[f][m] = static_cast<float>(static_cast<double>(triangle) * norm);
    }
  }
  return bank;
}

namespace {

// The log-mel features of `wave` [samples]: [feature_size, samples / hop_length].
at::Tensor log_mel_of(const at::Tensor& wave, const LogMelOptions& o) {
  const at::Tensor stft = at::stft(wave, o.n_fft, o.hop_length, o.n_fft, at::hann_window(o.n_fft),
                                   /*center=*/true, "reflect", /*normalized=*/false,
                                   /*onesided=*/true, /*return_complex=*/true);  // [bins, frames+1]
  const at::Tensor power = stft.narrow(1, 0, stft.size(1) - 1).abs().pow(2).contiguous();
  const at::Tensor mel = at::matmul(mel_filter_bank(o).t(), power);  // [mels, frames]
  at::Tensor log_spec = at::clamp_min(mel, 1e-10).log10();
  log_spec = at::maximum(log_spec, log_spec.max() - 8.0);
  return (log_spec + 4.0) / 4.0;
}

}  // namespace

at::Tensor log_mel_spectrogram(const std::vector<float>& samples, const LogMelOptions& o) {
  // One window: zeros after the audio, or the audio cut at chunk_length seconds.
  at::Tensor wave = at::zeros({o.samples()}, at::kFloat);
  const int64_t kept = std::min<int64_t>(o.samples(), static_cast<int64_t>(samples.size()));
  std::copy_n(samples.data(), kept, wave.data_ptr<float>());
  return log_mel_of(wave, o);
}

at::Tensor whole_log_mel_spectrogram(const std::vector<float>& samples, const LogMelOptions& o) {
  if (static_cast<int64_t>(samples.size()) <= o.samples()) return log_mel_spectrogram(samples, o);
  const at::Tensor wave = at::from_blob(const_cast<float*>(samples.data()),
                                        {static_cast<int64_t>(samples.size())}, at::kFloat);
  return log_mel_of(wave, o);
}

}  // namespace shardformer::audio

// Audio files through libsndfile, mixed to mono; resampling through libsoxr.
#include "shardformer/audio/audio.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <sndfile.h>
#include <soxr.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

namespace shardformer::audio {

namespace {

// Whether libsndfile's log says the data chunk promises more bytes than the file holds ("data :
// 96000 (should be 31970)"): a truncated file, which libsndfile would read short without
// complaint. Streamed writers' placeholder sizes (0, 2^31 - 1, 2^32 - 1) are not truncation.
bool data_chunk_truncated(SNDFILE* file) {
  std::string log(8192, '\0');
  sf_command(file, SFC_GET_LOG_INFO, log.data(), static_cast<int>(log.size()));
  const size_t at = log.find("\ndata : ");
  if (at == std::string::npos) return false;
  long long declared = 0, actual = 0;
  if (std::sscanf(log.c_str() + at, "\ndata : %lld (should be %lld)", &declared, &actual) != 2) {
    return false;
  }
  return declared > actual && declared != 0x7fffffffLL && declared != 0xffffffffLL;
}

}  // namespace

Waveform read_audio(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path)) {
    throw ConfigError(str(path.string(), ": no such audio file"));
  }
  SF_INFO info{};
  SNDFILE* opened = sf_open(path.c_str(), SFM_READ, &info);
  if (opened == nullptr) {
    throw ConfigError(
        str(path.string(), ": not an audio file libsndfile reads (", sf_strerror(nullptr), ")"));
  }
  const std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> file(opened, sf_close);
  if (info.channels < 1 || info.samplerate < 1) {
    throw ConfigError(str(path.string(), ": ", info.channels, " channels at ", info.samplerate,
                          " Hz is not audio"));
  }
  if (data_chunk_truncated(file.get())) {
    throw ConfigError(str(path.string(),
                          ": truncated: its header promises more audio than the "
                          "file holds"));
  }
  if (info.frames <= 0) throw ConfigError(str(path.string(), ": the file holds no samples"));
  std::vector<float> interleaved(static_cast<size_t>(info.frames) *
                                 static_cast<size_t>(info.channels));
  const sf_count_t read = sf_readf_float(file.get(), interleaved.data(), info.frames);
  if (read != info.frames) {
    throw ConfigError(str(path.string(), ": truncated: its header promises ", info.frames,
                          " frames, ", read, " could be read"));
  }
  Waveform wave{.samples = std::vector<float>(static_cast<size_t>(info.frames)),
                .sample_rate = info.samplerate};
  for (sf_count_t frame = 0; frame < info.frames; ++frame) {  // the channels' mean
    double sum = 0;
    for (int c = 0; c < info.channels; ++c) {
      sum += interleaved[static_cast<size_t>(frame * info.channels + c)];
    }
    wave.samples[static_cast<size_t>(frame)] = static_cast<float>(sum / info.channels);
  }
  return wave;
}

std::vector<float> resample(const std::vector<float>& samples, int64_t from_rate, int64_t to_rate) {
  if (from_rate <= 0 || to_rate <= 0) {
    throw Error(str("resample: rates must be positive (", from_rate, " Hz to ", to_rate, " Hz)"));
  }
  if (from_rate == to_rate || samples.empty()) return samples;
  const double ratio = static_cast<double>(to_rate) / static_cast<double>(from_rate);
  std::vector<float> out(
      static_cast<size_t>(std::ceil(static_cast<double>(samples.size()) * ratio)));
  size_t done = 0;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  const soxr_error_t error =
      soxr_oneshot(static_cast<double>(from_rate), static_cast<double>(to_rate), 1, samples.data(),
                   samples.size(), nullptr, out.data(), out.size(), &done, &io, &quality, nullptr);
  if (error != nullptr) throw Error(str("resample: libsoxr: ", error));
  out.resize(done);
  return out;
}

}  // namespace shardformer::audio

// The logits processors against HF's (tools/gen_generation_reference.py): repetition penalty,
// temperature, top-k, top-p and min-p, alone and together, and Whisper's suppressed tokens and
// timestamp rules, within 1e-5 of HF's scores with the same entries filtered; and a seeded
// chooser drawing the same tokens again.
#include "shardformer/sampling.h"
#include "test_util.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>

namespace shardformer {
namespace {

using nlohmann::json;

json load_reference() {
  std::ifstream in(testing::test_data_dir() / "generation" / "reference.json");
  if (!in) throw std::runtime_error("run tools/gen_generation_reference.py");
  return json::parse(in);
}

at::Tensor matrix(const json& rows, at::ScalarType dtype) {  // [rows, cols]; null is -inf
  std::vector<at::Tensor> out;
  for (const json& row : rows) {
    std::vector<double> values;
    for (const json& v : row) {
      values.push_back(v.is_null() ? -std::numeric_limits<double>::infinity() : v.get<double>());
    }
    out.push_back(at::tensor(values, at::kDouble));
  }
  return at::stack(out).to(dtype);
}

SamplingConfig setting_of(const json& s) {
  SamplingConfig config;
  config.do_sample = s.at("do_sample");
  config.temperature = s.value("temperature", 1.0);
  config.top_k = s.value("top_k", int64_t{50});
  config.top_p = s.value("top_p", 1.0);
  if (s.contains("min_p")) config.min_p = s.at("min_p").get<double>();
  config.repetition_penalty = s.value("repetition_penalty", 1.0);
  config.suppress_tokens = s.value("suppress_tokens", std::vector<int64_t>{});
  config.begin_suppress_tokens = s.value("begin_suppress_tokens", std::vector<int64_t>{});
  config.begin_index = s.value("begin_index", int64_t{0});
  if (s.contains("timestamps")) {
    const json& t = s.at("timestamps");
    config.timestamps = TimestampRules{
        .no_timestamps_token_id = t.at("no_timestamps_token_id"),
        .eos_token_id = t.at("eos_token_id"),
        .max_initial_timestamp_index = t.at("max_initial_timestamp_index").get<int64_t>()};
  }
  return config;
}

TEST(Sampling, ProcessedScoresEqualHFLogitsProcessors) {
  const json reference = load_reference();
  for (const json& c : reference.at("sampling")) {
    SCOPED_TRACE(c.at("setting").dump());
    const at::Tensor logits = matrix(c.at("logits"), at::kFloat);
    const at::Tensor sequences = matrix(c.at("sequences"), at::kLong);
    const at::Tensor expected = matrix(c.at("scores"), at::kFloat);
    const at::Tensor got = process_logits(logits, sequences, setting_of(c.at("setting")));
    const at::Tensor filtered = at::isinf(expected);
    EXPECT_TRUE(at::equal(at::isinf(got), filtered)) << "different entries filtered";
    const at::Tensor kept = at::logical_not(filtered);
    EXPECT_LE((got.masked_select(kept) - expected.masked_select(kept)).abs().max().item<double>(),
              1e-5);
  }
}

TEST(Sampling, ASeededChooserDrawsTheSameTokensAgain) {
  const at::Tensor logits = at::randn({4, 300});
  const at::Tensor sequences = at::zeros({4, 1}, at::kLong);
  SamplingConfig config{.do_sample = true, .temperature = 1.5, .top_k = 0, .seed = 11};
  TokenChooser a(config);
  TokenChooser b(config);
  config.seed = 12;
  TokenChooser c(config);
  bool differs = false;
  for (int step = 0; step < 8; ++step) {
    const at::Tensor x = a.next(logits, sequences);
    EXPECT_TRUE(at::equal(x, b.next(logits, sequences)));
    differs = differs || !at::equal(x, c.next(logits, sequences));
  }
  EXPECT_TRUE(differs) << "another seed drew the same 32 tokens";
}

}  // namespace
}  // namespace shardformer

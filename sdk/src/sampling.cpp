// HF's logits processors (RepetitionPenalty, SuppressTokensAtBegin, SuppressTokens, Whisper's
// TimeStamp, Temperature, TopK, TopP, MinP), written with the same tensor operations in the same
// order so that the processed scores equal HF's, and the seeded draw of the next token.
#include "shardformer/sampling.h"

#include <ATen/CPUGeneratorImpl.h>

#include <limits>

namespace shardformer {
namespace {

constexpr double kFiltered = -std::numeric_limits<double>::infinity();

// RepetitionPenaltyLogitsProcessor: every id seen is made less likely.
at::Tensor repetition_penalty(const at::Tensor& scores, const at::Tensor& sequences,
                              double penalty) {
  const at::Tensor seen = scores.gather(1, sequences);  // [batch, len]
  const at::Tensor penalized = at::where(seen < 0, seen * penalty, seen / penalty);
  return scores.scatter(1, sequences, penalized);
}

at::Tensor top_k(const at::Tensor& scores, int64_t k) {
  k = std::min(k, scores.size(-1));
  const at::Tensor kth = std::get<0>(at::topk(scores, k)).select(-1, k - 1).unsqueeze(-1);
  return scores.masked_fill(scores < kth, kFiltered);
}

at::Tensor top_p(const at::Tensor& scores, double p) {
  auto [sorted, indices] = at::sort(scores, -1, /*descending=*/false);
  const at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
  at::Tensor remove = cumulative <= (1 - p);
  remove.narrow(-1, remove.size(-1) - 1, 1).fill_(false);  // keep at least one
  return scores.masked_fill(remove.scatter(1, indices, remove), kFiltered);
}

at::Tensor min_p(const at::Tensor& scores, double p) {
  const at::Tensor probs = scores.softmax(-1);
  const at::Tensor threshold = probs.amax(-1, true) * p;
  at::Tensor remove = probs < threshold;
  remove.scatter_(-1, std::get<1>(at::topk(probs, 1)), false);
  return scores.masked_fill(remove, kFiltered);
}

// Sets `ids` (those inside the vocabulary) to -inf in every row.
at::Tensor suppress(const at::Tensor& scores, const std::vector<int64_t>& ids) {
  std::vector<int64_t> inside;
  for (int64_t id : ids) {
    if (id >= 0 && id < scores.size(-1)) inside.push_back(id);
  }
  if (inside.empty()) return scores;
  return scores.index_fill(-1, at::tensor(inside, scores.options().dtype(at::kLong)), kFiltered);
}

// WhisperTimeStampLogitsProcessor: <|notimestamps|> never; after a timestamp that follows text,
// another timestamp or the end; after two, text; timestamps never decrease (nor repeat one that
// closed a pair); the first token a timestamp no later than max_initial_timestamp_index; and a
// timestamp whenever their summed probability beats every text token's.
at::Tensor timestamp_rules(const at::Tensor& scores_in, const at::Tensor& sequences,
                           const TimestampRules& rules, int64_t begin_index) {
  at::Tensor scores = scores_in.clone();  // [batch, vocab]
  const int64_t begin = rules.timestamp_begin();
  const int64_t vocab = scores.size(-1);
  scores.select(-1, rules.no_timestamps_token_id).fill_(kFiltered);
  const at::Tensor seqs = sequences.cpu().contiguous();
  std::vector<int64_t> lowest(seqs.size(0), begin);  // per row: the first timestamp allowed
  for (int64_t row = 0; row < seqs.size(0); ++row) {
    const int64_t* ids = seqs[row].data_ptr<int64_t>() + begin_index;
    const int64_t n = seqs.size(1) - begin_index;
    const bool last_was_timestamp = n >= 1 && ids[n - 1] >= begin;
    const bool penultimate_was_timestamp = n < 2 || ids[n - 2] >= begin;
    if (last_was_timestamp) {
      if (penultimate_was_timestamp) {
        scores[row].narrow(0, begin, vocab - begin).fill_(kFiltered);
      } else {
        scores[row].narrow(0, 0, rules.eos_token_id).fill_(kFiltered);
      }
    }
    for (int64_t i = n - 1; i >= 0; --i) {
      if (ids[i] < begin) continue;
      lowest[row] = last_was_timestamp && !penultimate_was_timestamp ? ids[i] : ids[i] + 1;
      break;
    }
  }
  const at::Tensor vocab_ids = at::arange(vocab, scores.options().dtype(at::kLong));
  const at::Tensor below =
      at::tensor(lowest, scores.options().dtype(at::kLong)).unsqueeze(-1);  // [batch, 1]
  scores.masked_fill_((vocab_ids >= begin) & (vocab_ids < below), kFiltered);
  if (seqs.size(1) == begin_index) {
    scores.narrow(-1, 0, begin).fill_(kFiltered);
    if (rules.max_initial_timestamp_index) {
      const int64_t last_allowed = begin + *rules.max_initial_timestamp_index;
      if (last_allowed + 1 < vocab) {
        scores.narrow(-1, last_allowed + 1, vocab - last_allowed - 1).fill_(kFiltered);
      }
    }
  }
  const at::Tensor logprobs = scores.log_softmax(-1);
  const at::Tensor timestamp_logprob = logprobs.narrow(-1, begin, vocab - begin).logsumexp(-1);
  const at::Tensor max_text_logprob = std::get<0>(logprobs.narrow(-1, 0, begin).max(-1));
  const at::Tensor take_timestamp = (timestamp_logprob > max_text_logprob).unsqueeze(-1);
  scores.narrow(-1, 0, begin).masked_fill_(take_timestamp, kFiltered);
  return scores;
}

}  // namespace

at::Tensor process_logits(const at::Tensor& logits, const at::Tensor& sequences,
                          const SamplingConfig& config) {
  at::Tensor scores = logits.to(at::kFloat);
  if (config.repetition_penalty != 1.0) {
    scores = repetition_penalty(scores, sequences.to(scores.device()), config.repetition_penalty);
  }
  if (sequences.size(1) == config.begin_index) {
    scores = suppress(scores, config.begin_suppress_tokens);
  }
  scores = suppress(scores, config.suppress_tokens);
  if (config.timestamps) {
    scores = timestamp_rules(scores, sequences, *config.timestamps, config.begin_index);
  }
  if (!config.do_sample) return scores;
  if (config.temperature != 1.0) scores = scores / config.temperature;
  if (config.top_k != 0) scores = top_k(scores, config.top_k);
  if (config.top_p < 1.0) scores = top_p(scores, config.top_p);
  if (config.min_p) scores = min_p(scores, *config.min_p);
  return scores;
}

TokenChooser::TokenChooser(const SamplingConfig& config)
    : config_(config), generator_(at::make_generator<at::CPUGeneratorImpl>(config.seed)) {}

at::Tensor TokenChooser::next(const at::Tensor& logits, const at::Tensor& sequences) {
  const at::Tensor scores = process_logits(logits, sequences, config_);  // [batch, vocab]
  if (!config_.do_sample) return scores.argmax(-1);
  // Drawn on the CPU from this chooser's generator: the same on every rank and device.
  const at::Tensor probs = scores.softmax(-1).cpu();
  return at::multinomial(probs, 1, false, generator_).squeeze(1).to(logits.device());
}

}  // namespace shardformer

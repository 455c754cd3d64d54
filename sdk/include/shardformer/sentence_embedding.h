// sentence-transformers' modules after the transformer, read from a model folder: the pooling
// of token embeddings into one vector per sentence (1_Pooling/config.json), normalisation (a
// Normalize module in modules.json) and the longest input (sentence_bert_config.json).
#pragma once

#include <ATen/Tensor.h>

#include <cstdint>
#include <filesystem>

namespace shardformer {

struct SentencePooling {
  enum class Mode { kMean, kCls, kMax, kMeanSqrtLen };
  Mode mode = Mode::kMean;
  bool normalize = false;
  int64_t max_seq_length = 0;  // 0: none given
  int64_t dimension = 0;       // word_embedding_dimension; 0: not given

  // Reads modules.json and the files it names. A folder without modules.json is a plain HF
  // model: mean pooling, no normalisation. Throws CheckpointError naming the file and key for
  // a module type, pooling mode or key this version does not implement.
  static SentencePooling from_folder(const std::filesystem::path& folder);

  // hidden [batch, seq, dim], attention_mask [batch, seq] of 0/1 -> [batch, dim] in fp32,
  // computed as sentence-transformers does (padding excluded, then L2-normalised if asked).
  at::Tensor apply(const at::Tensor& hidden, const at::Tensor& attention_mask) const;
};

}  // namespace shardformer

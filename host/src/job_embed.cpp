// The embed job: texts in, sentence embeddings out, as sentence-transformers computes them with
// the model folder's tokenizer, pooling and normalisation; rank 0 prints their cosine
// similarities.
#include "job_modes.h"

#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/sentence_embedding.h"
#include "shardformer/strings.h"
#include "shardformer/tokenizer/wordpiece.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace shardformer::host {
namespace {

std::vector<std::string> read_lines(const JobConfig& config, const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) {
    throw ConfigError(str(config.source.string(), ": embed.sentences_file: cannot read '",
                          file.string(), "': ", std::strerror(errno)));
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back(line);
  }
  if (lines.empty()) {
    throw ConfigError(
        str(config.source.string(), ": embed.sentences_file: '", file.string(), "' holds no text"));
  }
  return lines;
}

at::Tensor to_tensor(const std::vector<std::vector<int64_t>>& rows) {  // [rows, width] int64
  const auto width = static_cast<int64_t>(rows.front().size());
  at::Tensor t = at::empty({static_cast<int64_t>(rows.size()), width}, at::kLong);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), t[static_cast<int64_t>(r)].data_ptr<int64_t>());
  }
  return t;
}

void print_similarities(const at::Tensor& embeddings, std::ostream& out) {  // [n, dim]
  const at::Tensor unit = embeddings / embeddings.norm(2, 1, true).clamp_min(1e-12);
  const at::Tensor similarity = at::matmul(unit, unit.t());  // [n, n]
  out << "cosine similarity:\n";
  for (int64_t i = 0; i < similarity.size(0); ++i) {
    for (int64_t j = 0; j < similarity.size(1); ++j) {
      char cell[16];
      std::snprintf(cell, sizeof(cell), "%7.3f", similarity[i][j].item<double>());
      out << cell;
    }
    out << "\n";
  }
}

}  // namespace

void run_embed(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const EmbedSection& e = config.embed;
  if (session.model().task() != ModelTask::kBase) {
    throw ConfigError(str(config.source.string(), ": job.mode = \"embed\" needs a base model ",
                          "(such as BertModel), not ", session.architecture()));
  }
  const std::vector<std::string> texts =
      e.sentences.empty() ? read_lines(config, e.sentences_file) : e.sentences;
  if (writer) check_output_path(config, e.output, "embed.output");
  const std::filesystem::path folder = session.checkpoint().directory();
  const auto tokenizer = tokenizer::WordPieceTokenizer::from_file(folder);
  const SentencePooling pooling = SentencePooling::from_folder(folder);
  int64_t max_length = e.max_length > 0 ? e.max_length : pooling.max_seq_length;
  const int64_t positions = session.model().shape().max_positions;
  if (max_length <= 0 || (positions > 0 && max_length > positions)) {
    max_length = positions > 0 ? positions : 512;
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<at::Tensor> pooled;  // [batch, dim] per batch, where holds_output()
  int64_t tokens = 0;
  for (size_t first = 0; first < texts.size(); first += static_cast<size_t>(e.batch_size)) {
    const size_t last = std::min(texts.size(), first + static_cast<size_t>(e.batch_size));
    const tokenizer::BatchEncoding batch =
        tokenizer.encode_batch({texts.begin() + static_cast<std::ptrdiff_t>(first),
                                texts.begin() + static_cast<std::ptrdiff_t>(last)},
                               {.max_length = static_cast<size_t>(max_length)});
    const ForwardInputs inputs{.input_ids = to_tensor(batch.input_ids),
                               .attention_mask = to_tensor(batch.attention_mask),
                               .token_type_ids = to_tensor(batch.token_type_ids)};
    tokens += inputs.attention_mask.sum().item<int64_t>();
    const at::Tensor hidden = session.forward(inputs);  // [batch, seq, dim]
    if (hidden.defined()) pooled.push_back(pooling.apply(hidden, inputs.attention_mask));
  }
  const double elapsed = seconds_since(start);
  log::info(str("embed: ", texts.size(), " sentences, ", tokens, " tokens in ", elapsed, " s (",
                static_cast<double>(tokens) / std::max(elapsed, 1e-9), " tokens/s)"));
  if (!writer) return;
  const at::Tensor embeddings = at::cat(pooled, 0);  // [n, dim]
  save_safetensors(e.output, {{"embeddings", embeddings.contiguous()}});
  out << "embed: " << embeddings.size(0) << " x " << embeddings.size(1) << " embeddings written to "
      << e.output.string() << "\n";
  print_similarities(embeddings, out);
}

}  // namespace shardformer::host

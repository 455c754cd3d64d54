// Layer split across pipeline stages and virtual chunks.
#include "shardformer/parallel/pipeline_stage_manager.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <numeric>

namespace shardformer {

std::vector<int64_t> PipelineStageManager::distribute_layers(int64_t num_layers,
                                                             int64_t num_pieces) {
  if (num_pieces < 1 || num_layers < num_pieces) {
    throw ConfigError(str("cannot split ", num_layers, " layers into ", num_pieces,
                          " pipeline pieces (each needs at least one layer)"));
  }
  std::vector<int64_t> counts(num_pieces, num_layers / num_pieces);
  const int64_t remainder = num_layers % num_pieces;
  const int64_t first = num_pieces / 2 - remainder / 2;  // centred on the middle pieces
  for (int64_t i = first; i < first + remainder; ++i) counts[i] += 1;
  return counts;
}

PipelineStageManager::PipelineStageManager(int64_t num_stages, int64_t stage, int64_t num_layers,
                                           int64_t num_chunks,
                                           std::optional<std::vector<int64_t>> layers_per_piece)
    : num_stages_(num_stages), stage_(stage), num_chunks_(num_chunks) {
  if (num_stages < 1 || num_chunks < 1 || stage < 0 || stage >= num_stages) {
    throw ConfigError(str("pipeline: stage ", stage, " of ", num_stages, " stages with ",
                          num_chunks, " chunks is not a valid position"));
  }
  const int64_t pieces = num_stages * num_chunks;
  std::vector<int64_t> counts =
      layers_per_piece ? *layers_per_piece : distribute_layers(num_layers, pieces);
  if (static_cast<int64_t>(counts.size()) != pieces) {
    throw ConfigError(str("pipeline: layers_per_stage lists ", counts.size(), " entries (",
                          shape_str(counts), ") but the pipeline has ", pieces, " pieces (",
                          num_stages, " stages x ", num_chunks, " chunks)"));
  }
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  if (total != num_layers) {
    throw ConfigError(str("pipeline: layers_per_stage ", shape_str(counts), " sums to ", total,
                          " but the model has ", num_layers, " layers"));
  }
  for (int64_t count : counts) {
    if (count < 1) {
      throw ConfigError(
          str("pipeline: layers_per_stage ", shape_str(counts), " leaves a piece without layers"));
    }
  }
  piece_begin_.assign(1, 0);
  for (int64_t count : counts) piece_begin_.push_back(piece_begin_.back() + count);
}

LayerRange PipelineStageManager::layers_of(int64_t stage, int64_t chunk) const {
  if (stage < 0 || stage >= num_stages_ || chunk < 0 || chunk >= num_chunks_) {
    throw Error(str("pipeline: no chunk ", chunk, " on stage ", stage));
  }
  const int64_t piece = chunk * num_stages_ + stage;
  return {piece_begin_[piece], piece_begin_[piece + 1]};
}

PieceLocation PipelineStageManager::next_piece(int64_t chunk) const {
  if (holds_last_piece(chunk)) throw Error("pipeline: the last piece has no next piece");
  return is_last_stage() ? PieceLocation{0, chunk + 1} : PieceLocation{stage_ + 1, chunk};
}

PieceLocation PipelineStageManager::prev_piece(int64_t chunk) const {
  if (holds_first_piece(chunk)) throw Error("pipeline: the first piece has no previous piece");
  return is_first_stage() ? PieceLocation{num_stages_ - 1, chunk - 1}
                          : PieceLocation{stage_ - 1, chunk};
}

}  // namespace shardformer

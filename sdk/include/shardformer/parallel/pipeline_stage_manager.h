// PipelineStageManager: which transformer layers each pipeline stage holds (an even split with
// the remainder on the middle stages, or an explicit list), the virtual chunks of an
// interleaved schedule, and a stage's neighbours.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace shardformer {

// Layers [begin, end) of the model.
struct LayerRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const LayerRange&) const = default;
};

struct PieceLocation {
  int64_t stage = 0, chunk = 0;
};

class PipelineStageManager {
 public:
  // num_chunks > 1 is the interleaved schedule's virtual stages: the model is cut into
  // num_stages x num_chunks pieces and stage s holds pieces s, s + num_stages, ...
  // layers_per_piece, when given, lists every piece's layer count in model order; otherwise
  // the split is even, with the remainder on the middle pieces (the first and last also hold
  // the embeddings and the head). Throws ConfigError for a list of the wrong length or sum,
  // an empty piece, or fewer layers than pieces.
  PipelineStageManager(int64_t num_stages, int64_t stage, int64_t num_layers,
                       int64_t num_chunks = 1,
                       std::optional<std::vector<int64_t>> layers_per_piece = std::nullopt);

  int64_t num_stages() const { return num_stages_; }
  int64_t stage() const { return stage_; }
  int64_t num_chunks() const { return num_chunks_; }
  bool is_first_stage() const { return stage_ == 0; }
  bool is_last_stage() const { return stage_ == num_stages_ - 1; }
  // Neighbouring stages (ranks within the pipeline group), wrapping around for interleaving.
  int64_t prev_stage() const { return (stage_ + num_stages_ - 1) % num_stages_; }
  int64_t next_stage() const { return (stage_ + 1) % num_stages_; }

  // Layers of this stage's chunk `chunk` (0 for a plain schedule).
  LayerRange layers(int64_t chunk = 0) const { return layers_of(stage_, chunk); }
  LayerRange layers_of(int64_t stage, int64_t chunk = 0) const;
  // Whether this stage holds the model's first piece (embeddings) or last (final norm, head).
  bool holds_first_piece(int64_t chunk = 0) const { return stage_ == 0 && chunk == 0; }
  bool holds_last_piece(int64_t chunk = 0) const {
    return is_last_stage() && chunk == num_chunks_ - 1;
  }
  int64_t num_layers() const { return piece_begin_.back(); }

  // The piece after / before this stage's chunk `chunk` in model order: the stage holding it
  // and its chunk there. Not defined past the last piece or before the first.
  PieceLocation next_piece(int64_t chunk) const;
  PieceLocation prev_piece(int64_t chunk) const;

  // Layer counts of the even split: [quotient] * pieces, +1 on `remainder` middle pieces.
  static std::vector<int64_t> distribute_layers(int64_t num_layers, int64_t num_pieces);

 private:
  int64_t num_stages_, stage_, num_chunks_;
  std::vector<int64_t> piece_begin_;  // prefix sums of the layers per piece, size pieces + 1
};

}  // namespace shardformer

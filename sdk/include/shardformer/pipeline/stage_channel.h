// Activations and their gradients between the pieces of a pipeline over the pp group. A
// tensor's shape and dtype travel once per (direction, chunk, micro-batch input shape) and are
// cached on both sides; after that only the data moves. Sends are posted without waiting.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/model.h"
#include "shardformer/parallel/pipeline_stage_manager.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <vector>

namespace shardformer::pipeline {

enum class Direction { kForward, kBackward };

// The shape a transfer's key takes from a pass's inputs, which every stage has: input_ids'
// [batch, seq], input_features' [batch, mels, frames] or pixel_values' [batch, channels, height,
// width] (when given), then an encoder-decoder's
// decoder_input_ids' [batch, tgt].
std::vector<int64_t> step_shape(const ForwardInputs& inputs);

// Message tags below this are the channel's; other exchanges on the pp group use tags from it.
inline constexpr int kFirstFreeTag = 1 << 30;

class StageChannel {
 public:
  // Throws ConfigError unless `stages` is this rank's place in `pp` (same stage count, this
  // rank's stage), so a mismatched group fails at once instead of timing out. Both must
  // outlive the channel.
  StageChannel(const distributed::ProcessGroup& pp, const PipelineStageManager& stages);
  StageChannel(const StageChannel&) = delete;
  StageChannel& operator=(const StageChannel&) = delete;
  ~StageChannel();

  // Posts the output of this stage's chunk `chunk` for micro-batch `microbatch` (input shape
  // [batch, seq]) to the piece it feeds: the next piece for an activation, the previous one
  // for a gradient. Throws Error when it changed shape or dtype since the last micro-batch of
  // that input shape.
  void send(const at::Tensor& tensor, Direction direction, int64_t chunk,
            const std::vector<int64_t>& input_shape, int64_t microbatch);
  // Blocks until the input of this stage's chunk `chunk` arrives from the piece that feeds it
  // (the previous piece's activation, the next piece's gradient); returns it on `device`.
  at::Tensor recv(Direction direction, int64_t chunk, const std::vector<int64_t>& input_shape,
                  int64_t microbatch, c10::Device device);
  // Waits for every posted send (before their inputs may be reused or the step ends); throws
  // the first failure after waiting for all of them.
  void wait_sends();

  // Shape/dtype messages sent and received so far (one per new key each way).
  int64_t metadata_sent() const { return metadata_sent_; }
  int64_t metadata_received() const { return metadata_received_; }

 private:
  // What both ends of a transfer know without talking: the direction, the sending piece's
  // chunk and the micro-batch's input shape (every stage has the inputs).
  struct Key {
    Direction direction = Direction::kForward;
    int64_t chunk = 0;
    std::vector<int64_t> input_shape;
    auto operator<=>(const Key&) const = default;
  };
  struct Meta {
    c10::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  static int tag(const Key& key, int64_t microbatch, bool meta);

  const distributed::ProcessGroup* pp_;
  const PipelineStageManager* stages_;
  std::map<Key, Meta> sent_, received_;
  std::vector<distributed::PendingWork> pending_;
  int64_t metadata_sent_ = 0, metadata_received_ = 0;
};

}  // namespace shardformer::pipeline

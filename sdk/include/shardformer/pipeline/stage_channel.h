// Activations and their gradients between pipeline stages over the pp group. A tensor's shape
// and dtype travel once per key (direction, chunk, micro-batch input shape) and are cached on
// both sides; after that only the data moves. Sends are posted without waiting. Gloo only.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/parallel/pipeline_stage_manager.h"

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <vector>

namespace shardformer::pipeline {

enum class Direction { kForward, kBackward };

// Message tags below this are the channel's; other exchanges on the pp group use tags from it.
inline constexpr int kFirstFreeTag = 1 << 30;

// Throws ConfigError unless `stages` describes this rank's place in `pp` (same stage count,
// this rank's stage), so a mismatched group fails at once instead of timing out.
void check_stage_group(const PipelineStageManager& stages, const distributed::ProcessGroup& pp);

// What both ends of a transfer know without talking: the direction, the sending piece's chunk
// and the input shape [batch, seq] of the micro-batch (every stage has the inputs).
struct ChannelKey {
  Direction direction = Direction::kForward;
  int64_t chunk = 0;  // the chunk of the piece that sends
  std::vector<int64_t> input_shape;
  auto operator<=>(const ChannelKey&) const = default;
};

class StageChannel {
 public:
  explicit StageChannel(const distributed::ProcessGroup& pp) : pp_(&pp) {}
  StageChannel(const StageChannel&) = delete;
  StageChannel& operator=(const StageChannel&) = delete;
  ~StageChannel();

  // Posts `tensor` to stage `dst`; its shape/dtype go first when new under `key`. Throws Error
  // when a tensor under a known key changed shape or dtype.
  void send(const at::Tensor& tensor, int64_t dst, const ChannelKey& key, int64_t microbatch);
  // Blocks until the matching send from stage `src` arrives; returns it on `device`.
  at::Tensor recv(int64_t src, const ChannelKey& key, int64_t microbatch, c10::Device device);
  // Waits for every posted send (before their inputs may be reused or the step ends); throws
  // the first failure after waiting for all of them.
  void wait_sends();

  // Shape/dtype messages sent and received so far (one per new key each way).
  int64_t metadata_sent() const { return metadata_sent_; }
  int64_t metadata_received() const { return metadata_received_; }

 private:
  struct Meta {
    c10::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  const distributed::ProcessGroup* pp_;
  std::map<ChannelKey, Meta> sent_, received_;
  std::vector<distributed::SendHandle> pending_;
  int64_t metadata_sent_ = 0, metadata_received_ = 0;
};

}  // namespace shardformer::pipeline

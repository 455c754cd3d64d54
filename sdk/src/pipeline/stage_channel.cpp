// Stage-to-stage transfers with cached shape/dtype metadata. Every message has its own tag
// (direction, chunk, micro-batch, metadata or data), so Gloo matches receives whatever order
// messages arrive in (NCCL ignores tags: the host refuses pipelines on CUDA for now).
#include "shardformer/pipeline/stage_channel.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <exception>

namespace shardformer::pipeline {

std::vector<int64_t> step_shape(const ForwardInputs& inputs) {
  std::vector<int64_t> shape;
  for (const at::Tensor* ids : {&inputs.input_ids, &inputs.input_features, &inputs.pixel_values,
                                &inputs.decoder_input_ids}) {
    if (ids->defined()) {
      const auto sizes = ids->sizes();
      shape.insert(shape.end(), sizes.begin(), sizes.end());
    }
  }
  return shape;
}
namespace {

constexpr int64_t kMaxDims = 8;
constexpr int64_t kMaxChunks = 64;

const char* direction_name(Direction d) {
  return d == Direction::kForward ? "activation" : "gradient";
}

}  // namespace

StageChannel::StageChannel(const distributed::ProcessGroup& pp, const PipelineStageManager& stages)
    : pp_(&pp), stages_(&stages) {
  if (stages.num_stages() != pp.size() || stages.stage() != pp.rank()) {
    throw ConfigError(str("pipeline: the model is stage ", stages.stage(), " of ",
                          stages.num_stages(), " but the pp group puts this rank at ", pp.rank(),
                          " of ", pp.size()));
  }
}

int StageChannel::tag(const Key& key, int64_t microbatch, bool meta) {
  const int64_t direction = key.direction == Direction::kForward ? 0 : 1;
  const int64_t t = ((microbatch * kMaxChunks + key.chunk) * 2 + direction) * 2 + (meta ? 1 : 0);
  if (key.chunk >= kMaxChunks || t >= kFirstFreeTag) {
    throw Error(str("pipeline: micro-batch ", microbatch, " / chunk ", key.chunk,
                    " is beyond the message tags"));
  }
  return static_cast<int>(t);
}

StageChannel::~StageChannel() {
  try {
    wait_sends();
  } catch (const std::exception&) {
    // A failed send was (or will be) reported by the operation that failed the step.
  }
}

void StageChannel::send(const at::Tensor& tensor, Direction direction, int64_t chunk,
                        const std::vector<int64_t>& input_shape, int64_t microbatch) {
  const PieceLocation to =
      direction == Direction::kForward ? stages_->next_piece(chunk) : stages_->prev_piece(chunk);
  const auto dst_rank = static_cast<int>(to.stage);
  const Key key{direction, chunk, input_shape};
  const auto found = sent_.find(key);
  if (found == sent_.end()) {
    if (tensor.dim() > kMaxDims) {
      throw Error(str("pipeline: cannot send a ", tensor.dim(), "-d ",
                      direction_name(key.direction), " (at most ", kMaxDims, " dims)"));
    }
    at::Tensor meta = at::zeros({kMaxDims + 2}, at::kLong);  // [dtype, ndim, dims...]
    meta[0] = static_cast<int64_t>(tensor.scalar_type());
    meta[1] = tensor.dim();
    for (int64_t d = 0; d < tensor.dim(); ++d) meta[2 + d] = tensor.size(d);
    pending_.push_back(pp_->isend(meta, dst_rank, tag(key, microbatch, true)));
    sent_[key] = Meta{tensor.scalar_type(), tensor.sizes().vec()};
    ++metadata_sent_;
  } else if (found->second.shape != tensor.sizes().vec() ||
             found->second.dtype != tensor.scalar_type()) {
    throw Error(str("pipeline: the ", direction_name(key.direction), " of chunk ", key.chunk,
                    " for input shape ", shape_str(key.input_shape), " was ",
                    shape_str(found->second.shape), " ", c10::toString(found->second.dtype),
                    " and is now ", shape_str(tensor.sizes().vec()), " ",
                    c10::toString(tensor.scalar_type())));
  }
  // Gloo sends from host memory; NCCL from the device.
  pending_.push_back(pp_->isend(tensor.detach(), dst_rank, tag(key, microbatch, false)));
}

at::Tensor StageChannel::recv(Direction direction, int64_t chunk,
                              const std::vector<int64_t>& input_shape, int64_t microbatch,
                              c10::Device device) {
  const PieceLocation from =
      direction == Direction::kForward ? stages_->prev_piece(chunk) : stages_->next_piece(chunk);
  const auto src_rank = static_cast<int>(from.stage);
  const Key key{direction, from.chunk, input_shape};
  auto found = received_.find(key);
  if (found == received_.end()) {
    at::Tensor meta = at::empty({kMaxDims + 2}, at::kLong);
    pp_->recv_(meta, src_rank, tag(key, microbatch, true));
    const auto* m = meta.data_ptr<int64_t>();
    if (m[1] < 0 || m[1] > kMaxDims) {
      throw Error(str("pipeline: stage ", from.stage, " sent metadata for a ", m[1], "-d tensor"));
    }
    Meta received{static_cast<c10::ScalarType>(m[0]), std::vector<int64_t>(m + 2, m + 2 + m[1])};
    found = received_.emplace(key, std::move(received)).first;
    ++metadata_received_;
  }
  at::Tensor tensor =
      at::empty(found->second.shape, at::TensorOptions().dtype(found->second.dtype).device(device));
  pp_->recv_(tensor, src_rank, tag(key, microbatch, false));
  return tensor;
}

void StageChannel::wait_sends() {
  std::vector<distributed::PendingWork> pending;
  pending.swap(pending_);
  std::exception_ptr first;
  for (auto& handle : pending) {
    try {
      handle.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace shardformer::pipeline

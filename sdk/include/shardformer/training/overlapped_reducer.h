// Data-parallel gradient all-reduce overlapped with the backward pass (DDP's reducer): buckets
// of parameters in reverse order, each all-reduced asynchronously as soon as backward has
// accumulated the gradients of all its parameters, while backward goes on with earlier layers.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/model.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace shardformer::training {

class OverlappedReducer {
 public:
  // Buckets of about bucket_bytes over model's parameters that require grad (last parameter
  // first: the order backward finishes them), one dtype a bucket. Installs a post-accumulate
  // hook on each; they act only while armed.
  OverlappedReducer(Model& model, const distributed::ProcessGroup& dp,
                    int64_t bucket_bytes = 25 << 20);
  ~OverlappedReducer();
  OverlappedReducer(const OverlappedReducer&) = delete;
  OverlappedReducer& operator=(const OverlappedReducer&) = delete;

  // Before the backward pass that completes this step's gradients (the last micro-batch's):
  // from now on a bucket whose parameters have all accumulated is sent. Buckets go out in
  // bucket order on every rank, as collectives must.
  void arm();
  // After that backward: sends what is left (parameters backward did not reach), waits for
  // every bucket and writes the sums into the gradients (a parameter without a gradient keeps
  // none, on every rank alike). Collective over dp. A parameter accumulated twice in the armed
  // backward (used in two reentrant backward passes) cannot be sent early: Error.
  void finish();
  // Buckets sent while backward was still running in the last finish()ed step.
  int64_t sent_during_backward() const { return sent_during_backward_; }
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    std::vector<at::Tensor> params;
    std::vector<bool> accumulated;  // per parameter, in the armed backward
    size_t ready = 0;
    std::vector<at::Tensor> grads;  // the defined gradients sent, in order
    at::Tensor flat;
    std::optional<distributed::PendingWork> work;
  };
  void on_accumulated(size_t bucket, size_t param);
  void send(Bucket& bucket);

  const distributed::ProcessGroup* dp_;
  std::vector<at::Tensor> hooked_;
  std::vector<Bucket> buckets_;
  bool armed_ = false;
  size_t next_ = 0;  // the next bucket to send: they leave in order
  int64_t sent_during_backward_ = 0;
};

}  // namespace shardformer::training

// Bucketed data-parallel all-reduce launched from post-accumulate-grad hooks during backward.
#include "shardformer/training/overlapped_reducer.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace shardformer::training {

namespace {

class AccumulatedHook : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit AccumulatedHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  void operator()(const torch::autograd::Variable&) override { fn_(); }

 private:
  std::function<void()> fn_;
};

}  // namespace

OverlappedReducer::OverlappedReducer(Model& model, const distributed::ProcessGroup& dp,
                                     int64_t bucket_bytes)
    : dp_(&dp) {
  std::vector<at::Tensor> params;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  int64_t bytes = bucket_bytes;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (bytes >= bucket_bytes ||
        buckets_.back().params.front().scalar_type() != it->scalar_type()) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(*it);
    bytes += it->numel() * static_cast<int64_t>(it->element_size());
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.accumulated.assign(bucket.params.size(), false);
    for (size_t i = 0; i < bucket.params.size(); ++i) {
      torch::autograd::impl::set_post_acc_grad_hooks(
          bucket.params[i],
          std::make_unique<AccumulatedHook>([this, b, i] { on_accumulated(b, i); }));
      hooked_.push_back(bucket.params[i]);
    }
  }
}

OverlappedReducer::~OverlappedReducer() {
  for (const at::Tensor& p : hooked_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

void OverlappedReducer::arm() {
  armed_ = true;
  next_ = 0;
  sent_during_backward_ = 0;
  for (Bucket& bucket : buckets_) {
    bucket.ready = 0;
    bucket.accumulated.assign(bucket.params.size(), false);
    bucket.work.reset();
  }
}

void OverlappedReducer::on_accumulated(size_t b, size_t i) {
  if (!armed_) return;
  Bucket& bucket = buckets_[b];
  if (bucket.accumulated[i]) {
    throw Error(shardformer::str("data-parallel overlap: a parameter of shape ",
                                 bucket.params[i].sizes(),
                                 " accumulated its gradient twice in one backward pass"));
  }
  bucket.accumulated[i] = true;
  ++bucket.ready;
  while (next_ < buckets_.size() && buckets_[next_].ready == buckets_[next_].params.size()) {
    send(buckets_[next_++]);
    ++sent_during_backward_;
  }
}

void OverlappedReducer::send(Bucket& bucket) {
  torch::NoGradGuard no_grad;
  bucket.grads.clear();
  std::vector<at::Tensor> parts;
  for (const at::Tensor& p : bucket.params) {
    if (!p.grad().defined()) continue;
    bucket.grads.push_back(p.grad());
    parts.push_back(p.grad().reshape({-1}));
  }
  if (parts.empty()) return;
  bucket.flat = at::cat(parts);
  bucket.work = dp_->all_reduce_async(bucket.flat);
}

void OverlappedReducer::finish() {
  armed_ = false;
  while (next_ < buckets_.size()) send(buckets_[next_++]);
  torch::NoGradGuard no_grad;
  for (Bucket& bucket : buckets_) {
    if (!bucket.work) continue;  // no gradient in it
    bucket.work->wait();
    int64_t offset = 0;
    for (at::Tensor& grad : bucket.grads) {
      grad.copy_(bucket.flat.narrow(0, offset, grad.numel()).view_as(grad));
      offset += grad.numel();
    }
    bucket.grads.clear();
    bucket.flat = at::Tensor();
    bucket.work.reset();
  }
}

}  // namespace shardformer::training

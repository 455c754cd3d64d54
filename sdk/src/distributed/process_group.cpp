// ProcessGroup collectives over a c10d backend, with error messages naming the group.
#include "shardformer/distributed/process_group.h"

#include "process_group_impl.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::distributed {
namespace {

// The Error that names the group and this rank for a c10d failure (peer gone, timeout).
Error group_error(const ProcessGroup::Impl& impl, const char* op, const std::exception& e) {
  return Error(str(op, " on group '", impl.name, "' failed at group rank ", impl.rank, " of ",
                   impl.size, ": ", e.what()));
}

// Issues an operation (which may already fail, e.g. on a closed connection).
template <typename Issue>
c10::intrusive_ptr<c10d::Work> issue(const ProcessGroup::Impl& impl, const char* op, Issue start) {
  try {
    return start();
  } catch (const std::exception& e) {
    throw group_error(impl, op, e);
  }
}

void wait_for(const ProcessGroup::Impl& impl, const char* op,
              const c10::intrusive_ptr<c10d::Work>& work) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw group_error(impl, op, e);
  }
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

const std::string& ProcessGroup::name() const { return impl_->name; }
int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }

void ProcessGroup::all_reduce_(at::Tensor& tensor, ReduceOp op) const {
  if (impl_->size == 1) return;
  impl_->stats.all_reduces += 1;
  impl_->stats.all_reduce_elements += tensor.numel();
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  wait_for(*impl_, "all_reduce", issue(*impl_, "all_reduce", [&] {
    return impl_->backend->allreduce(tensors, options);
  }));
}

PendingWork ProcessGroup::all_reduce_async(const at::Tensor& tensor) const {
  auto state = std::make_shared<PendingWork::State>();
  state->group = impl_;
  state->op = "all_reduce";
  if (impl_->size == 1) {
    state->done = true;
    return PendingWork(std::move(state));
  }
  if (!tensor.is_contiguous()) {
    throw Error(str("all_reduce on group '", impl_->name, "': the tensor must be contiguous"));
  }
  impl_->stats.all_reduces += 1;
  impl_->stats.all_reduce_elements += tensor.numel();
  state->tensor = tensor;
  std::vector<at::Tensor> tensors{tensor};
  state->work = issue(*impl_, "all_reduce", [&] { return impl_->backend->allreduce(tensors); });
  return PendingWork(std::move(state));
}

at::Tensor ProcessGroup::all_gather(const at::Tensor& tensor, int64_t dim) const {
  if (impl_->size == 1) return tensor;
  impl_->stats.all_gathers += 1;
  impl_->stats.all_gather_elements += tensor.numel();
  const at::Tensor input = tensor.contiguous();
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < impl_->size; ++i) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  wait_for(*impl_, "all_gather",
           issue(*impl_, "all_gather", [&] { return impl_->backend->allgather(outputs, inputs); }));
  return at::cat(outputs[0], dim);
}

void ProcessGroup::broadcast_(at::Tensor& tensor, int root) const {
  if (impl_->size == 1) return;
  impl_->stats.broadcasts += 1;
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  wait_for(*impl_, "broadcast",
           issue(*impl_, "broadcast", [&] { return impl_->backend->broadcast(tensors, options); }));
}

void ProcessGroup::send(const at::Tensor& tensor, int dst, int tag) const {
  isend(tensor, dst, tag).wait();
}

PendingWork ProcessGroup::isend(const at::Tensor& tensor, int dst, int tag) const {
  if (dst == impl_->rank || dst < 0 || dst >= impl_->size) {
    throw Error(str("send on group '", impl_->name, "': destination ", dst,
                    " is not another rank of ", impl_->size));
  }
  impl_->stats.sends += 1;
  impl_->stats.send_elements += tensor.numel();
  auto state = std::make_shared<PendingWork::State>();
  state->group = impl_;
  state->tensor = tensor.contiguous();
  std::vector<at::Tensor> tensors{state->tensor};
  state->work = issue(*impl_, "send", [&] { return impl_->backend->send(tensors, dst, tag); });
  return PendingWork(std::move(state));
}

void PendingWork::wait() {
  if (state_ == nullptr || state_->done) return;
  state_->done = true;
  wait_for(*state_->group, state_->op, state_->work);
  state_->tensor = at::Tensor();
}

void ProcessGroup::recv_(at::Tensor& tensor, int src, int tag) const {
  if (src == impl_->rank || src < 0 || src >= impl_->size || !tensor.is_contiguous()) {
    throw Error(str("recv on group '", impl_->name, "': source ", src, " of ", impl_->size,
                    " into a ", tensor.is_contiguous() ? "" : "non-", "contiguous tensor"));
  }
  impl_->stats.recvs += 1;
  std::vector<at::Tensor> tensors{tensor};
  wait_for(*impl_, "recv",
           issue(*impl_, "recv", [&] { return impl_->backend->recv(tensors, src, tag); }));
}

void ProcessGroup::barrier() const {
  if (impl_->size == 1) return;
  impl_->stats.barriers += 1;
  wait_for(*impl_, "barrier", issue(*impl_, "barrier", [&] { return impl_->backend->barrier(); }));
}

CommStats ProcessGroup::stats() const { return impl_->stats; }
void ProcessGroup::reset_stats() const { impl_->stats = CommStats{}; }

}  // namespace shardformer::distributed

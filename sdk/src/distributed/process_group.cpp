// ProcessGroup collectives over a c10d backend, with error messages naming the group.
#include "shardformer/distributed/process_group.h"

#include "process_group_impl.h"
#include "shardformer/error.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/runtime/activity.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <torch/version.h>

namespace shardformer::distributed {
namespace {

// c10d's single-tensor collectives: LibTorch before 2.15 names them _allgather_base,
// _reduce_scatter_base and alltoall_base (still there, forwarding, in 2.15). A GPU machine's own
// torch may be older than the venv's (tools/gpu_check.sh).
// Templates, so that the branch of the other version is never instantiated.
constexpr bool kOldC10dNames = TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 15;

template <typename Backend>
c10::intrusive_ptr<c10d::Work> all_gather_single(Backend& b, at::Tensor& out, at::Tensor& in) {
  if constexpr (kOldC10dNames) {
    return b._allgather_base(out, in);
  } else {
    return b.all_gather_single(out, in);
  }
}
template <typename Backend>
c10::intrusive_ptr<c10d::Work> reduce_scatter_single(Backend& b, at::Tensor& out, at::Tensor& in) {
  if constexpr (kOldC10dNames) {
    return b._reduce_scatter_base(out, in);
  } else {
    return b.reduce_scatter_single(out, in);
  }
}
template <typename Backend>
c10::intrusive_ptr<c10d::Work> all_to_all_single(Backend& b, at::Tensor& out, at::Tensor& in,
                                                 std::vector<int64_t>& counts) {
  if constexpr (kOldC10dNames) {
    return b.alltoall_base(out, in, counts, counts);
  } else {
    return b.all_to_all_single(out, in, counts, counts);
  }
}

// c10d's message without Gloo's source location ("[.../pair.cc:545] ") and its generic advice
// ("This is typically caused by ..."), and only its first line.
std::string backend_reason(const std::exception& e) {
  std::string text = e.what();
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.front() == '[') {
    if (const size_t close = text.find("] "); close != std::string::npos) text.erase(0, close + 2);
  }
  if (const size_t advice = text.find(" This is typically caused by");
      advice != std::string::npos) {
    text.erase(advice);
  }
  return text;
}

// The Error that names the group and this rank for a c10d failure (peer gone, timeout).
Error group_error(const ProcessGroup::Impl& impl, const char* op, const std::exception& e) {
  return Error(str(op, " on group '", impl.name, "' failed at group rank ", impl.rank, " of ",
                   impl.size, ": ", backend_reason(e)));
}

// "all_reduce #12 on group 'tp' (rank 0 of 2)": the operation as a rank's activity names it.
std::string operation_text(const ProcessGroup::Impl& impl, const char* op, int64_t number,
                           const std::string& detail) {
  return str(op, " #", number, " on group '", impl.name, "' (rank ", impl.rank, " of ", impl.size,
             detail.empty() ? "" : ", ", detail, ")");
}

// Issues an operation (which may already fail, e.g. on a closed connection); returns its work
// and its number on this group (the group's operations are numbered in issue order).
template <typename Issue>
std::pair<c10::intrusive_ptr<c10d::Work>, int64_t> issue(ProcessGroup::Impl& impl, const char* op,
                                                         Issue start,
                                                         const std::string& detail = {}) {
  const int64_t number = ++impl.operations;
  const runtime::OperationScope activity(op, operation_text(impl, op, number, detail));
  try {
    return {start(), number};
  } catch (const std::exception& e) {
    throw group_error(impl, op, e);
  }
}

void wait_for(const ProcessGroup::Impl& impl, const char* op,
              const std::pair<c10::intrusive_ptr<c10d::Work>, int64_t>& work,
              const std::string& detail = {}) {
  const runtime::OperationScope activity(
      "wait", "waiting for " + operation_text(impl, op, work.second, detail));
  try {
    work.first->wait();
  } catch (const std::exception& e) {
    throw group_error(impl, op, e);
  }
}

// Whether `tensor` travels as a host copy (MeshOptions::host_staging): a CUDA tensor of ranks
// whose group runs over Gloo, or any tensor in the CPU stand-in of that path.
bool staged(const ProcessGroup::Impl& impl, const at::Tensor& tensor) {
  using enum MeshOptions::HostStaging;
  return impl.host_staging == kEveryTensor ||
         (impl.host_staging == kCudaTensors && !tensor.device().is_cpu());
}

// A contiguous host tensor of `tensor`'s shape and dtype, in pinned memory where `tensor` is on a
// GPU (so that the copies out and back run at the bus's speed).
at::Tensor host_buffer(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(),
                   tensor.options().device(at::kCPU).pinned_memory(!tensor.device().is_cpu()));
}

at::Tensor host_copy(const at::Tensor& tensor) { return host_buffer(tensor).copy_(tensor); }

// What the backend receives for `tensor`: its host copy when staged, else the tensor itself.
at::Tensor on_wire(const ProcessGroup::Impl& impl, const at::Tensor& tensor) {
  return staged(impl, tensor) ? host_copy(tensor) : tensor;
}

// Whether a collective on `tensor` goes through the group's shared memory.
bool through_shared_memory(const ProcessGroup::Impl& impl, const at::Tensor& tensor) {
  return impl.shared_memory != nullptr && tensor.device().is_cpu() &&
         static_cast<int64_t>(tensor.nbytes()) >= impl.shared_memory_min_bytes;
}

// Runs a shared-memory collective as the group's next operation, named in the rank's activity
// as a Gloo one is; a peer that is gone or a timeout fails it with the same Error.
template <typename Body>
void run_shared(ProcessGroup::Impl& impl, const char* op, Body body) {
  const int64_t number = ++impl.operations;
  const runtime::OperationScope activity(op, operation_text(impl, op, number, ""));
  try {
    body();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw group_error(impl, op, e);
  }
}

}  // namespace

ProcessGroup::ProcessGroup(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

const std::string& ProcessGroup::name() const { return impl_->name; }
int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
bool ProcessGroup::shared_memory() const { return impl_->shared_memory != nullptr; }

void ProcessGroup::all_reduce_(at::Tensor& tensor, ReduceOp op) const {
  if (impl_->size == 1) return;
  impl_->stats.all_reduces += 1;
  impl_->stats.all_reduce_elements += tensor.numel();
  if (op == ReduceOp::kSum && tensor.scalar_type() == at::kFloat && tensor.is_contiguous() &&
      through_shared_memory(*impl_, tensor)) {
    run_shared(*impl_, "all_reduce", [&] { impl_->shared_memory->all_reduce_sum_(tensor); });
    return;
  }
  if (op == ReduceOp::kSum &&
      (tensor.scalar_type() == at::kBFloat16 || tensor.scalar_type() == at::kHalf) &&
      through_shared_memory(*impl_, tensor)) {
    // bf16 / fp16 (mixed-precision training's tp sums): summed in fp32 and rounded once, which
    // for two ranks is Gloo's sum to the bit (it widens each pair too) and for more is closer.
    // Over Gloo's sockets a bf16 tp 2 training step of the tiny GPT-2 took 4x as long.
    at::Tensor wide = tensor.to(at::kFloat).contiguous();  // [tensor's shape] fp32
    run_shared(*impl_, "all_reduce", [&] { impl_->shared_memory->all_reduce_sum_(wide); });
    tensor.copy_(wide);
    return;
  }
  const at::Tensor wire = on_wire(*impl_, tensor);
  std::vector<at::Tensor> tensors{wire};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  wait_for(*impl_, "all_reduce", issue(*impl_, "all_reduce", [&] {
    return impl_->backend->allreduce(tensors, options);
  }));
  if (!wire.is_same(tensor)) tensor.copy_(wire);
}

at::Tensor ProcessGroup::sum_produced(
    int64_t rows, int64_t cols, const at::TensorOptions& options,
    const std::function<void(int64_t first, at::Tensor& block)>& produce,
    const at::Tensor& bias) const {
  const at::Tensor b = bias.defined() ? bias.to(options).contiguous() : bias;  // [cols]
  at::Tensor out;                                                              // [rows, cols]
  sum_produced_finished_by(rows, cols, options, produce,
                           [&](int64_t first, const std::vector<at::Tensor>& terms) {
                             if (terms.size() == 1) {  // the whole all-reduced sum
                               out = b.defined() ? terms.front().add_(b) : terms.front();
                               return;
                             }
                             if (!out.defined()) out = at::empty({rows, cols}, options);
                             at::Tensor block = out.narrow(0, first, terms.front().size(0));
                             kernels::sum_terms(terms, b, block);
                           });
  return out;
}

namespace {

// Whether a producing sum of a [rows, cols] matrix goes through the group's shared memory.
bool sums_through_shared_memory(const ProcessGroup::Impl& impl, int64_t rows, int64_t cols,
                                const at::TensorOptions& options) {
  return impl.size > 1 && options.dtype() == at::kFloat && impl.shared_memory != nullptr &&
         options.device().is_cpu() && rows * cols * 4 >= impl.shared_memory_min_bytes &&
         cols * 4 <= impl.shared_memory->chunk_bytes();
}

}  // namespace

void ProcessGroup::sum_produced_finished_by(
    int64_t rows, int64_t cols, const at::TensorOptions& options,
    const std::function<void(int64_t first, at::Tensor& block)>& produce,
    const std::function<void(int64_t first, const std::vector<at::Tensor>& terms)>& finish) const {
  if (!sums_through_shared_memory(*impl_, rows, cols, options)) {
    at::Tensor whole = at::empty({rows, cols}, options);  // [rows, cols]
    produce(0, whole);
    all_reduce_(whole);
    finish(0, {whole});
    return;
  }
  impl_->stats.all_reduces += 1;
  impl_->stats.all_reduce_elements += rows * cols;
  run_shared(*impl_, "all_reduce", [&] {
    impl_->shared_memory->produce_in_rounds(rows, cols, options, produce, finish);
  });
}

std::vector<at::Tensor> ProcessGroup::sum_produced_shared(
    int64_t rows, int64_t cols, const at::TensorOptions& options, int outputs,
    const std::function<void(int64_t first, at::Tensor& block)>& produce,
    const std::function<void(int64_t first, const std::vector<at::Tensor>& terms,
                             const std::vector<at::Tensor>& outs)>& finish) const {
  if (!sums_through_shared_memory(*impl_, rows, cols, options)) {
    std::vector<at::Tensor> outs;
    for (int o = 0; o < outputs; ++o) outs.push_back(at::empty({rows, cols}, options));
    sum_produced_finished_by(rows, cols, options, produce,
                             [&](int64_t first, const std::vector<at::Tensor>& terms) {
                               std::vector<at::Tensor> parts;
                               for (const at::Tensor& o : outs) {
                                 parts.push_back(o.narrow(0, first, terms.front().size(0)));
                               }
                               finish(first, terms, parts);
                             });
    return outs;
  }
  impl_->stats.all_reduces += 1;
  impl_->stats.all_reduce_elements += rows * cols;
  std::vector<at::Tensor> outs;
  run_shared(*impl_, "all_reduce", [&] {
    outs = impl_->shared_memory->produce_shared(rows, cols, outputs, produce, finish);
  });
  return outs;
}

at::Tensor ProcessGroup::reduce_scatter_produced(
    int64_t outer, int64_t length, int64_t cols, const at::TensorOptions& options,
    const std::function<void(int64_t first, at::Tensor& block)>& produce,
    const at::Tensor& bias) const {
  const at::Tensor b = bias.defined() ? bias.to(options).contiguous() : bias;  // [cols]
  at::Tensor out = at::empty({outer, length / impl_->size, cols}, options);  // [outer, local, cols]
  reduce_scatter_produced_finished_by(
      outer, length, cols, options, produce,
      [&](int64_t o, int64_t at, const std::vector<at::Tensor>& terms) {
        at::Tensor rows = out.select(0, o).narrow(0, at, terms.front().size(0));
        if (terms.size() > 1) {
          kernels::sum_terms(terms, b, rows);
        } else {
          b.defined() ? at::add_out(rows, terms.front(), b) : rows.copy_(terms.front());
        }
      });
  return out;
}

void ProcessGroup::reduce_scatter_produced_finished_by(
    int64_t outer, int64_t length, int64_t cols, const at::TensorOptions& options,
    const std::function<void(int64_t first, at::Tensor& block)>& produce,
    const std::function<void(int64_t outer, int64_t at, const std::vector<at::Tensor>& terms)>&
        finish) const {
  if (length % impl_->size != 0) {
    throw Error(str("reduce_scatter on group '", impl_->name, "': ", length,
                    " rows along the split do not divide by ", impl_->size, " ranks"));
  }
  const int64_t local = length / impl_->size;
  const bool shared = impl_->size > 1 && options.dtype() == at::kFloat &&
                      impl_->shared_memory != nullptr && options.device().is_cpu() &&
                      outer * local * cols * 4 >= impl_->shared_memory_min_bytes &&
                      cols * 4 <= impl_->shared_memory->chunk_bytes();
  if (!shared) {
    at::Tensor whole = at::empty({outer * length, cols}, options);  // [outer * length, cols]
    produce(0, whole);
    // [outer, local, cols], contiguous: each batch entry's rows are one block for `finish`
    const at::Tensor mine = reduce_scatter(whole.view({outer, length, cols}), 1).contiguous();
    for (int64_t o = 0; o < outer; ++o) finish(o, 0, {mine.select(0, o)});
    return;
  }
  impl_->stats.reduce_scatters += 1;
  impl_->stats.reduce_scatter_elements += outer * length * cols;
  run_shared(*impl_, "reduce_scatter",
             [&] { impl_->shared_memory->produce_scattered(outer, local, cols, produce, finish); });
}

void ProcessGroup::all_gather_consumed(
    const at::Tensor& input,
    const std::function<void(int64_t first, const at::Tensor& block)>& consume) const {
  const int64_t cols = input.size(2);
  const bool shared =
      impl_->size > 1 && input.is_contiguous() && through_shared_memory(*impl_, input) &&
      cols * input.element_size() <= impl_->size * impl_->shared_memory->chunk_bytes();
  if (!shared) {
    consume(0, all_gather(input, 1).view({-1, cols}));
    return;
  }
  impl_->stats.all_gathers += 1;
  impl_->stats.all_gather_elements += input.numel();
  run_shared(*impl_, "all_gather",
             [&] { impl_->shared_memory->all_gather_consumed(input, consume); });
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
  state->tensor = on_wire(*impl_, tensor);
  if (!state->tensor.is_same(tensor)) {
    state->finish = [target = tensor, wire = state->tensor]() mutable { target.copy_(wire); };
  }
  std::vector<at::Tensor> tensors{state->tensor};
  state->work = issue(*impl_, "all_reduce", [&] { return impl_->backend->allreduce(tensors); });
  return PendingWork(std::move(state));
}

at::Tensor ProcessGroup::all_gather(const at::Tensor& tensor, int64_t dim) const {
  if (impl_->size == 1) return tensor;
  impl_->stats.all_gathers += 1;
  impl_->stats.all_gather_elements += tensor.numel();
  const at::Tensor input = staged(*impl_, tensor) ? host_copy(tensor) : tensor.contiguous();
  if (through_shared_memory(*impl_, input)) {
    dim = dim < 0 ? dim + input.dim() : dim;
    auto shape = input.sizes().vec();
    shape.at(static_cast<size_t>(dim)) *= impl_->size;
    at::Tensor output = at::empty(shape, input.options());
    run_shared(*impl_, "all_gather",
               [&] { impl_->shared_memory->all_gather_into(input, output, dim); });
    return output;
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < impl_->size; ++i) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  wait_for(*impl_, "all_gather",
           issue(*impl_, "all_gather", [&] { return impl_->backend->allgather(outputs, inputs); }));
  return at::cat(outputs[0], dim).to(tensor.device());
}

void ProcessGroup::all_gather_in_place(at::Tensor& output, int64_t dim) const {
  if (impl_->size == 1) return;
  dim = dim < 0 ? dim + output.dim() : dim;
  const int64_t n = output.size(dim) / impl_->size;
  const at::Tensor mine = output.narrow(dim, impl_->rank * n, n);
  if (!through_shared_memory(*impl_, mine) || !output.is_contiguous()) {
    output.copy_(all_gather(mine.contiguous(), dim));
    return;
  }
  impl_->stats.all_gathers += 1;
  impl_->stats.all_gather_elements += mine.numel();
  run_shared(*impl_, "all_gather", [&] {
    impl_->shared_memory->all_gather_into(mine, output, dim, /*own_in_place=*/true);
  });
}

at::Tensor ProcessGroup::gather_produced_to_first(
    int64_t rows, int64_t cols, const at::TensorOptions& options,
    const std::function<void(at::Tensor& block)>& produce) const {
  const bool first = impl_->rank == 0;
  if (impl_->size == 1) {
    at::Tensor whole = at::empty({rows, cols}, options);
    produce(whole);
    return whole;
  }
  const auto bytes = static_cast<int64_t>(rows * cols * options.dtype().itemsize());
  const bool shared = impl_->shared_memory != nullptr && options.device().is_cpu() &&
                      bytes >= impl_->shared_memory_min_bytes;
  if (!shared) {  // the same choice on every rank
    at::Tensor mine = at::empty({rows, cols}, options);
    produce(mine);
    const at::Tensor whole = all_gather(mine, 1);  // every rank receives here
    return first ? whole : at::Tensor();
  }
  impl_->stats.all_gathers += 1;
  impl_->stats.all_gather_elements += rows * cols;
  at::Tensor whole;
  run_shared(*impl_, "gather", [&] {
    whole = impl_->shared_memory->gather_produced_to_first(rows, cols, options, produce);
  });
  return whole;
}

namespace {

// A collective from `input` into `output` without waiting (output_is_larger: the output holds
// group-size times the input's elements, as an all-gather's; else the reverse); a group of one
// copies.
template <typename Start>
PendingWork start_single(const std::shared_ptr<ProcessGroup::Impl>& impl, const char* op,
                         const at::Tensor& input, at::Tensor& output, bool output_is_larger,
                         Start start) {
  auto state = std::make_shared<PendingWork::State>();
  state->group = impl;
  state->op = op;
  if (impl->size == 1) {
    output.copy_(input);
    state->done = true;
    return PendingWork(std::move(state));
  }
  const int64_t larger = output_is_larger ? output.numel() : input.numel();
  const int64_t smaller = output_is_larger ? input.numel() : output.numel();
  if (!input.is_contiguous() || !output.is_contiguous() || larger != smaller * impl->size) {
    throw Error(str(op, " on group '", impl->name, "': contiguous tensors with the ",
                    output_is_larger ? "output" : "input", " group-size times the other"));
  }
  at::Tensor in = on_wire(*impl, input);
  at::Tensor out = in.is_same(input) ? output : host_buffer(output);
  state->tensor = in;
  state->keep = out;
  if (!out.is_same(output)) {
    state->finish = [target = output, out]() mutable { target.copy_(out); };
  }
  state->work = issue(*impl, op, [&] { return start(out, in); });
  return PendingWork(std::move(state));
}

}  // namespace

PendingWork ProcessGroup::all_gather_into_async(const at::Tensor& input, at::Tensor& output) const {
  if (impl_->size > 1) {
    impl_->stats.all_gathers += 1;
    impl_->stats.all_gather_elements += input.numel();
  }
  return start_single(
      impl_, "all_gather", input, output, true,
      [&](at::Tensor& out, at::Tensor& in) { return all_gather_single(*impl_->backend, out, in); });
}

at::Tensor ProcessGroup::reduce_scatter(const at::Tensor& tensor, int64_t dim) const {
  if (impl_->size == 1) return tensor;
  dim = dim < 0 ? dim + tensor.dim() : dim;
  const at::Tensor input = tensor.movedim(dim, 0).contiguous();  // [size * n, ..]
  if (input.size(0) % impl_->size != 0) {
    throw Error(str("reduce_scatter on group '", impl_->name, "': dimension ", dim, " of size ",
                    input.size(0), " does not divide by ", impl_->size));
  }
  auto shape = input.sizes().vec();
  shape[0] /= impl_->size;
  at::Tensor output = at::empty(shape, input.options());
  reduce_scatter_async(input, output).wait();
  return output.movedim(0, dim);
}

PendingWork ProcessGroup::reduce_scatter_async(const at::Tensor& input, at::Tensor& output) const {
  if (impl_->size > 1) {
    impl_->stats.reduce_scatters += 1;
    impl_->stats.reduce_scatter_elements += input.numel();
  }
  return start_single(impl_, "reduce_scatter", input, output, false,
                      [&](at::Tensor& out, at::Tensor& in) {
                        return reduce_scatter_single(*impl_->backend, out, in);
                      });
}

at::Tensor ProcessGroup::all_to_all(const at::Tensor& tensor) const {
  if (impl_->size == 1) return tensor;
  at::Tensor input = staged(*impl_, tensor) ? host_copy(tensor) : tensor.contiguous();
  if (input.size(0) % impl_->size != 0) {
    throw Error(str("all_to_all on group '", impl_->name, "': dimension 0 of size ", input.size(0),
                    " does not divide by ", impl_->size));
  }
  impl_->stats.all_to_alls += 1;
  impl_->stats.all_to_all_elements += input.numel();
  at::Tensor output = at::empty_like(input);
  if (through_shared_memory(*impl_, input)) {
    run_shared(*impl_, "all_to_all", [&] { impl_->shared_memory->all_to_all_into(input, output); });
    return output;
  }
  std::vector<int64_t> counts;  // empty: equal blocks
  wait_for(*impl_, "all_to_all", issue(*impl_, "all_to_all", [&] {
    return all_to_all_single(*impl_->backend, output, input, counts);
  }));
  return output.to(tensor.device());
}

void ProcessGroup::broadcast_(at::Tensor& tensor, int root) const {
  if (impl_->size == 1) return;
  impl_->stats.broadcasts += 1;
  const at::Tensor wire = on_wire(*impl_, tensor);
  std::vector<at::Tensor> tensors{wire};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  wait_for(*impl_, "broadcast",
           issue(*impl_, "broadcast", [&] { return impl_->backend->broadcast(tensors, options); }));
  if (!wire.is_same(tensor)) {
    tensor.copy_(wire);
  } else if (!tensor.is_inference()) {
    // The backend wrote the memory itself: count the write as an in-place op would, so that
    // what is derived from the tensor's version (MKL's packed weights) sees ZeRO-1's updates.
    tensor.unsafeGetTensorImpl()->bump_version();
  }
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
  state->tensor = staged(*impl_, tensor) ? host_copy(tensor) : tensor.contiguous();
  std::vector<at::Tensor> tensors{state->tensor};
  state->detail = str("to rank ", dst, ", tag ", tag);
  state->work = issue(
      *impl_, "send", [&] { return impl_->backend->send(tensors, dst, tag); }, state->detail);
  return PendingWork(std::move(state));
}

void PendingWork::wait() {
  if (state_ == nullptr || state_->done) return;
  state_->done = true;
  wait_for(*state_->group, state_->op, state_->work, state_->detail);
  if (state_->finish) state_->finish();
  state_->tensor = at::Tensor();
}

void ProcessGroup::recv_(at::Tensor& tensor, int src, int tag) const {
  if (src == impl_->rank || src < 0 || src >= impl_->size || !tensor.is_contiguous()) {
    throw Error(str("recv on group '", impl_->name, "': source ", src, " of ", impl_->size,
                    " into a ", tensor.is_contiguous() ? "" : "non-", "contiguous tensor"));
  }
  impl_->stats.recvs += 1;
  const at::Tensor wire = staged(*impl_, tensor) ? host_buffer(tensor) : tensor;
  std::vector<at::Tensor> tensors{wire};
  const std::string detail = str("from rank ", src, ", tag ", tag);
  wait_for(*impl_, "recv",
           issue(
               *impl_, "recv", [&] { return impl_->backend->recv(tensors, src, tag); }, detail),
           detail);
  if (!wire.is_same(tensor)) tensor.copy_(wire);
}

void ProcessGroup::barrier() const {
  if (impl_->size == 1) return;
  impl_->stats.barriers += 1;
  wait_for(*impl_, "barrier", issue(*impl_, "barrier", [&] { return impl_->backend->barrier(); }));
}

CommStats ProcessGroup::stats() const {
  CommStats stats = impl_->stats;
  if (impl_->shared_memory)
    stats.shared_memory_wait_seconds = impl_->shared_memory->waited_seconds();
  return stats;
}

void ProcessGroup::reset_stats() const {
  impl_->stats = CommStats{};
  if (impl_->shared_memory) impl_->shared_memory->reset_waited();
}

}  // namespace shardformer::distributed

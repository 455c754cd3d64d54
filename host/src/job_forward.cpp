// The forward job: token ids in (right-padded into a batch), the model's output (and its
// causal-LM loss) out to a safetensors file.
#include "job_modes.h"

#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/losses.h"
#include "shardformer/padding.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace shardformer::host {
namespace {

void check_token_ids(const std::vector<std::vector<int64_t>>& sequences, int64_t vocab_size,
                     const std::string& key) {
  for (size_t row = 0; row < sequences.size(); ++row) {
    for (int64_t id : sequences[row]) {
      if (id >= vocab_size) {
        throw ConfigError(str(key, "[", row, "] has token id ", id,
                              ", outside the model's vocabulary [0, ", vocab_size, ")"));
      }
    }
  }
}

}  // namespace

void run_forward(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const ForwardSection& f = config.forward;
  const ModelShape shape = session.model().shape();
  check_token_ids(f.input_ids, shape.vocab_size, "forward.input_ids");
  size_t longest = 0;
  for (const auto& ids : f.input_ids) longest = std::max(longest, ids.size());
  if (shape.max_positions > 0 && static_cast<int64_t>(longest) > shape.max_positions) {
    throw ConfigError(str("forward.input_ids: a sequence of ", longest,
                          " tokens exceeds the model's ", shape.max_positions, " positions"));
  }
  const PaddedBatch batch = right_pad(f.input_ids, 0);
  const c10::Device device = session.model().parameters().front().device();
  const ForwardInputs inputs{.input_ids = batch.input_ids.to(device),
                             .attention_mask = batch.attention_mask.to(device)};
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor output = session.forward(inputs);  // defined where holds_output()
  const double elapsed = seconds_since(start);
  at::Tensor loss;
  if (f.loss) {  // HF's labels = input_ids, padding ignored
    const at::Tensor labels =
        inputs.input_ids.masked_fill(inputs.attention_mask == 0, kIgnoreIndex);
    loss = session.loss(inputs, labels);
  }
  if (!writer) return;
  std::map<std::string, at::Tensor> tensors{{session.model().output_name(), output},
                                            {"input_ids", batch.input_ids},
                                            {"attention_mask", batch.attention_mask}};
  if (loss.defined()) tensors["loss"] = loss.detach().reshape({1}).cpu();
  save_safetensors(f.output, tensors);
  out << "forward: " << session.model().output_name() << " " << shape_str(output.sizes().vec())
      << " written to " << f.output.string() << " (" << elapsed * 1e3 << " ms)\n";
  if (loss.defined()) out << "forward: loss " << loss.item<double>() << "\n";
}

}  // namespace shardformer::host

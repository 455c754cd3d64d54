// The forward job: token ids in (right-padded into a batch), the model's output (and its
// causal-LM loss) out to a safetensors file.
#include "job_modes.h"

#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/losses.h"
#include "shardformer/padding.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

namespace shardformer::host {

void run_forward(const JobConfig& config, Session& session, bool writer, std::ostream& out) {
  const ForwardSection& f = config.forward;
  const ModelShape shape = session.model().shape();
  check_token_ids(config, f.input_ids, "forward.input_ids", shape.vocab_size);
  const size_t longest = longest_sequence(f.input_ids);
  const auto length = static_cast<int64_t>(f.input_ids[longest].size());
  if (shape.max_positions > 0 && length > shape.max_positions) {
    throw ConfigError(str(config.source.string(), ": forward.input_ids[", longest, "] holds ",
                          length, " tokens, more than the model's ", shape.max_positions,
                          " positions"));
  }
  if (writer) check_output_path(config, f.output, "forward.output");
  const PaddedBatch batch = right_pad(f.input_ids, 0);
  const c10::Device device = session.model().parameters().front().device();
  // Only the writer needs the output: the other tp ranks of a language model skip receiving
  // its whole vocabulary.
  const ForwardInputs inputs{.input_ids = batch.input_ids.to(device),
                             .attention_mask = batch.attention_mask.to(device),
                             .logits_on_first_tp_rank = true};
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor output = session.forward(inputs);  // defined where `writer`
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

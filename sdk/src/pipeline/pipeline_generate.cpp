// Pipelined decoding steps on top of generate(): the last stage chooses, every stage learns.
#include "shardformer/pipeline/pipeline_generate.h"

#include "shardformer/pipeline/stage_channel.h"

#include <ATen/ATen.h>

namespace shardformer::pipeline {

GenerationResult pipeline_generate(Model& model, const distributed::ProcessGroup& pp,
                                   const std::vector<std::vector<int64_t>>& prompts,
                                   const GenerationConfig& config) {
  const PipelineStageManager* stages = model.pipeline();
  if (stages == nullptr) return generate(model, prompts, config);
  StageChannel channel(pp, *stages);
  int64_t step = 0;
  DecodeStep decode;
  decode.logits = [&](const ForwardInputs& step_inputs) {
    const at::Tensor& ids = step_inputs.input_ids;  // [batch, seq]
    const c10::Device device = ids.device();
    at::Tensor out;
    for (int64_t chunk = 0; chunk < stages->num_chunks(); ++chunk) {
      ForwardInputs inputs = step_inputs;
      inputs.chunk = chunk;
      if (!model.starts_model(chunk)) {
        inputs.hidden_states =
            channel.recv(Direction::kForward, chunk, ids.sizes().vec(), step, device);
      }
      out = model.forward(inputs);  // hidden [batch, seq, hidden], or logits on the last piece
      if (!model.ends_model(chunk)) {
        channel.send(out, Direction::kForward, chunk, ids.sizes().vec(), step);
      }
    }
    // [batch, vocab] on the last stage
    return stages->is_last_stage() ? out.select(1, -1) : at::Tensor();
  };
  decode.share = [&](at::Tensor& tokens) {
    tokens = tokens.contiguous();
    pp.broadcast_(tokens, static_cast<int>(stages->num_stages() - 1));
    channel.wait_sends();
    ++step;
  };
  return generate(model, prompts, config, decode);
}

}  // namespace shardformer::pipeline

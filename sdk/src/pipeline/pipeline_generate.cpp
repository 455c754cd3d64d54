// Pipelined decoding steps on top of generate(): the last stage chooses, every stage learns.
#include "shardformer/pipeline/pipeline_generate.h"

#include "shardformer/pipeline/stage_channel.h"

#include <ATen/ATen.h>

namespace shardformer::pipeline {

namespace {

// Runs `generate` (one of generate()'s forms) with pipelined decoding steps: each step runs the
// stages in model order (those the step needs), the last stage picks the tokens and broadcasts
// them.
template <typename Generate>
GenerationResult with_pipelined_steps(Model& model, const distributed::ProcessGroup& pp,
                                      const PipelineStageManager& stages, Generate generate) {
  StageChannel channel(pp, stages);
  int64_t step = 0;
  DecodeStep decode;
  decode.logits = [&](const ForwardInputs& step_inputs) {
    const std::vector<int64_t> key = step_shape(step_inputs);  // [batch, seq] (+ [batch, tgt])
    const c10::Device device = model.parameters().front().device();
    at::Tensor out;
    for (int64_t chunk = 0; chunk < stages.num_chunks(); ++chunk) {
      ForwardInputs inputs = step_inputs;
      inputs.chunk = chunk;
      if (!model.runs_step(inputs, chunk)) continue;  // an encoder-decoder's encoder, after step 0
      if (!model.starts_step(inputs, chunk)) {
        inputs.hidden_states = channel.recv(Direction::kForward, chunk, key, step, device);
      }
      out = model.forward(inputs);  // hidden [batch, seq, hidden], or logits on the last piece
      if (!model.ends_model(chunk)) channel.send(out, Direction::kForward, chunk, key, step);
    }
    // [batch, vocab] on the last stage
    return stages.is_last_stage() ? out.select(1, -1) : at::Tensor();
  };
  decode.share = [&](at::Tensor& tokens) {
    tokens = tokens.contiguous();
    pp.broadcast_(tokens, static_cast<int>(stages.num_stages() - 1));
    channel.wait_sends();
    ++step;
  };
  return generate(decode);
}

}  // namespace

GenerationResult pipeline_generate(Model& model, const distributed::ProcessGroup& pp,
                                   const std::vector<std::vector<int64_t>>& prompts,
                                   const GenerationConfig& config) {
  const PipelineStageManager* stages = model.pipeline();
  if (stages == nullptr) return generate(model, prompts, config);
  return with_pipelined_steps(model, pp, *stages, [&](const DecodeStep& decode) {
    return generate(model, prompts, config, decode);
  });
}

GenerationResult pipeline_generate_from_features(Model& model, const distributed::ProcessGroup& pp,
                                                 const at::Tensor& input_features,
                                                 const GenerationConfig& config) {
  const PipelineStageManager* stages = model.pipeline();
  if (stages == nullptr) return generate_from_features(model, input_features, config);
  return with_pipelined_steps(model, pp, *stages, [&](const DecodeStep& decode) {
    return generate_from_features(model, input_features, config, decode);
  });
}

}  // namespace shardformer::pipeline

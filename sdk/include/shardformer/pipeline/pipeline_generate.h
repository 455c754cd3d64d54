// Generation through a pipeline: each decoding step runs the stages in model order
// (every chunk of an interleaved split), each with a KV cache of its own layers; the last stage
// picks the next tokens and broadcasts them to every stage.
#pragma once

#include "shardformer/distributed/process_group.h"
#include "shardformer/generation.h"

namespace shardformer::pipeline {

// Collective over `pp`: every stage calls it with the same prompts and gets the same result.
// `model` is this rank's stage; without one it is generate().
GenerationResult pipeline_generate(Model& model, const distributed::ProcessGroup& pp,
                                   const std::vector<std::vector<int64_t>>& prompts,
                                   const GenerationConfig& config);
// The same for an audio encoder-decoder model (generate_from_features).
GenerationResult pipeline_generate_from_features(Model& model, const distributed::ProcessGroup& pp,
                                                 const at::Tensor& input_features,
                                                 const GenerationConfig& config);

}  // namespace shardformer::pipeline

// The Llama family's tensor-parallel policy, as a table.
#pragma once

#include "shardformer/parallel/policy.h"

namespace shardformer::llama {

// tied: the LM head is embed_tokens, which the first and the last pipeline stage then share.
Policy llama_policy(bool tied);

}  // namespace shardformer::llama

// GPT-2's tensor-parallel policy, as a table: which module is split how.
#pragma once

#include "shardformer/parallel/policy.h"

namespace shardformer::gpt2 {

// tied: the LM head is wte, which the first and the last pipeline stage then share.
Policy gpt2_policy(bool tied);

}  // namespace shardformer::gpt2

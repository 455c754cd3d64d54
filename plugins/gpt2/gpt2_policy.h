// GPT-2's tensor-parallel policy, as a table: which module is split how.
#pragma once

#include "shardformer/parallel/policy.h"

namespace shardformer::gpt2 {

Policy gpt2_policy();

}  // namespace shardformer::gpt2

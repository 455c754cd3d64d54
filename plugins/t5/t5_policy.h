// T5's sharding policy as a table, with a prefix for models that hold T5 under another name
// (BLIP-2's "language_model.").
#pragma once

#include "shardformer/parallel/policy.h"

#include <string>

namespace shardformer::t5 {

// The rules and the parameters several pipeline stages share, each name behind `prefix`.
std::vector<PolicyRule> t5_rules(const std::string& prefix = "");
std::vector<std::string> t5_shared_parameters(const std::string& prefix = "");

}  // namespace shardformer::t5

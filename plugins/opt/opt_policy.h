// OPT's sharding policy as a table, with a prefix for models that hold an OPT causal LM under
// another name (BLIP-2's "language_model.").
#pragma once

#include "shardformer/parallel/policy.h"

#include <string>
#include <vector>

namespace shardformer::opt {

// The rules, each name behind `prefix`.
std::vector<PolicyRule> opt_rules(const std::string& prefix = "");
// The parameters several pipeline stages share: the embedding when the head is tied to it.
std::vector<std::string> opt_shared_parameters(bool tied, const std::string& prefix = "");

}  // namespace shardformer::opt

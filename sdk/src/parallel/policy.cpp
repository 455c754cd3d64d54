// Policy pattern matching and the ShardKind names used in job configs.
#include "shardformer/parallel/policy.h"

#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>

#include <array>
#include <utility>

namespace shardformer {
namespace {

std::vector<std::string_view> components(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    parts.push_back(path.substr(0, dot));
    if (dot == std::string_view::npos) break;
    path.remove_prefix(dot + 1);
  }
  return parts;
}

constexpr std::array<std::pair<std::string_view, ShardKind>, 5> kKindNames{{
    {"replicate", ShardKind::kReplicate},
    {"column", ShardKind::kColumn},
    {"row", ShardKind::kRow},
    {"vocab", ShardKind::kVocab},
    {"embedding_dim", ShardKind::kEmbeddingDim},
}};

constexpr std::array<std::pair<std::string_view, SequenceParallelMode>, 3> kModeNames{{
    {"split_gather", SequenceParallelMode::kSplitGather},
    {"all_to_all", SequenceParallelMode::kAllToAll},
    {"ring_attn", SequenceParallelMode::kRingAttn},
}};

void check_family_sequence_modes(const ParallelContext& context, const Policy& family_policy) {
  const ShardConfig& c = context.config;
  if (!c.enable_sequence_parallelism) return;
  const auto& modes = family_policy.sequence_modes();
  if (std::find(modes.begin(), modes.end(), c.sequence_parallelism_mode) == modes.end()) {
    std::string supported;
    for (const SequenceParallelMode mode : modes) {
      supported += str(supported.empty() ? "" : ", ", "\"", sequence_mode_name(mode), "\"");
    }
    throw ConfigError(str("shard.sequence_parallelism_mode = \"",
                          sequence_mode_name(c.sequence_parallelism_mode),
                          "\": this model family does not support it (",
                          supported.empty() ? "it runs without sequence parallelism; set "
                                              "shard.enable_sequence_parallelism = false"
                                            : "supported: " + supported,
                          ")"));
  }
}

}  // namespace

bool Policy::matches(std::string_view pattern, std::string_view path) {
  const auto want = components(pattern), have = components(path);
  if (want.empty() || want.size() > have.size()) return false;
  const size_t offset = have.size() - want.size();
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] != "*" && want[i] != have[offset + i]) return false;
  }
  return true;
}

ShardStyle Policy::style_for(std::string_view path) const {
  for (auto it = rules_.rbegin(); it != rules_.rend(); ++it) {
    if (matches(it->pattern, path)) return it->style;
  }
  return {};
}

int ParallelContext::tp_size() const { return tp ? tp->size() : 1; }
int ParallelContext::tp_rank() const { return tp ? tp->rank() : 0; }
int ParallelContext::dp_rank() const { return dp ? dp->rank() : 0; }

const distributed::ProcessGroup* ParallelContext::sequence_group() const {
  if (!config.enable_sequence_parallelism) return nullptr;
  return config.sequence_parallelism_mode == SequenceParallelMode::kSplitGather ? tp : sp;
}

ParallelContext with_family_policy(const ParallelContext* job, const Policy& family_policy) {
  ParallelContext result;
  result.policy = family_policy;
  if (job != nullptr) {
    result.tp = job->tp;
    result.dp = job->dp;
    result.sp = job->sp;
    result.pipeline = job->pipeline;
    result.config = job->config;
    for (const auto& rule : job->policy.rules()) result.policy.add(rule);
  }
  check_sequence_layout(result);
  check_family_sequence_modes(result, family_policy);
  return result;
}

const char* shard_kind_name(ShardKind kind) {
  for (const auto& [name, k] : kKindNames) {
    if (k == kind) return name.data();
  }
  return "?";
}

ShardKind parse_shard_kind(std::string_view name) {
  for (const auto& [known, kind] : kKindNames) {
    if (known == name) return kind;
  }
  throw ConfigError("unknown shard style '" + std::string(name) +
                    "' (expected replicate, column, row, vocab or embedding_dim)");
}

void check_sequence_layout(const ParallelContext& context) {
  const ShardConfig& c = context.config;
  if (!c.enable_sequence_parallelism) {
    if (context.sp != nullptr && context.sp->size() > 1) {
      throw ConfigError(str("parallel.sp_size = ", context.sp->size(),
                            " needs shard.enable_sequence_parallelism = true"));
    }
    return;
  }
  const char* mode = sequence_mode_name(c.sequence_parallelism_mode);
  if (c.sequence_parallelism_mode == SequenceParallelMode::kSplitGather) {
    if (!context.tensor_parallel()) {
      throw ConfigError(
          "shard.sequence_parallelism_mode = \"split_gather\" splits the sequence over the "
          "tensor-parallel group: it needs parallel.tp_size > 1 and "
          "shard.enable_tensor_parallelism = true");
    }
    if (context.sp != nullptr && context.sp->size() > 1) {
      throw ConfigError(
          str("shard.sequence_parallelism_mode = \"split_gather\" uses the tp "
              "group; parallel.sp_size = ",
              context.sp->size(), " is for all_to_all and ring_attn"));
    }
  } else if (context.sp == nullptr || context.sp->size() < 2) {
    throw ConfigError(str("shard.sequence_parallelism_mode = \"", mode,
                          "\" splits the sequence over the sp axis: set parallel.sp_size > 1"));
  }
  if (c.enable_sequence_overlap &&
      c.sequence_parallelism_mode != SequenceParallelMode::kSplitGather) {
    throw ConfigError(
        str("shard.enable_sequence_overlap applies to split_gather only, not ", mode));
  }
}

const char* sequence_mode_name(SequenceParallelMode mode) {
  for (const auto& [name, m] : kModeNames) {
    if (m == mode) return name.data();
  }
  return "?";
}

SequenceParallelMode parse_sequence_mode(std::string_view name) {
  for (const auto& [known, mode] : kModeNames) {
    if (known == name) return mode;
  }
  throw ConfigError("unknown sequence_parallelism_mode '" + std::string(name) +
                    "' (expected split_gather, all_to_all or ring_attn)");
}

}  // namespace shardformer

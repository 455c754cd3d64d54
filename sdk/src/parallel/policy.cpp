// Policy pattern matching and the ShardKind names used in job configs.
#include "shardformer/parallel/policy.h"

#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"

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

ParallelContext with_family_policy(const ParallelContext* job, const Policy& family_policy) {
  ParallelContext result;
  result.policy = family_policy;
  if (job != nullptr) {
    result.tp = job->tp;
    result.dp = job->dp;
    result.pipeline = job->pipeline;
    result.config = job->config;
    for (const auto& rule : job->policy.rules()) result.policy.add(rule);
  }
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

}  // namespace shardformer

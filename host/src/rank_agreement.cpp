// Rank identities (config hash, versions), their exchange and comparison.
#include "rank_agreement.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"
#include "shardformer/version.h"

#include <torch/version.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace shardformer::host {
namespace {

std::string fnv1a64(const std::string& bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  char text[24];
  std::snprintf(text, sizeof(text), "%016" PRIx64, hash);
  return text;
}

// The part of a value that must agree: up to " of " (the path that follows may differ).
std::string compared_part(const std::string& value) { return value.substr(0, value.find(" of ")); }

// One identity as text for the store: "what\tvalue\n" per part.
std::string serialize(const RankIdentity& identity) {
  std::string text;
  for (const auto& [what, value] : identity) text += what + "\t" + value + "\n";
  return text;
}

RankIdentity deserialize(const std::string& text) {
  RankIdentity identity;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    identity.emplace_back(line.substr(0, tab),
                          tab == std::string::npos ? std::string() : line.substr(tab + 1));
  }
  return identity;
}

}  // namespace

RankIdentity job_identity(const JobConfig& config) {
  std::ifstream in(config.source, std::ios::binary);
  const std::string bytes = in ? std::string(std::istreambuf_iterator<char>(in), {})
                               : config.source.string();  // an embedded config: its name
  return {{"job config", str("fnv1a64 ", fnv1a64(bytes), " of ", config.source.string())},
          {"shardformer-host", str(SHARDFORMER_VERSION_STRING, " (SDK ABI ", SHARDFORMER_ABI_MAJOR,
                                   ".", SHARDFORMER_ABI_MINOR, ")")},
          {"LibTorch", TORCH_VERSION}};
}

std::optional<std::string> disagreement(const std::vector<RankIdentity>& identities) {
  if (identities.empty()) return std::nullopt;
  std::vector<std::string> lines;
  for (size_t part = 0; part < identities.front().size(); ++part) {
    const std::string& what = identities.front()[part].first;
    // compared value -> (ranks, a value to show)
    std::map<std::string, std::pair<std::vector<size_t>, std::string>> groups;
    for (size_t rank = 0; rank < identities.size(); ++rank) {
      const RankIdentity& identity = identities[rank];
      const std::string value = part < identity.size() && identity[part].first == what
                                    ? identity[part].second
                                    : std::string("(not reported)");
      auto& group = groups[compared_part(value)];
      group.first.push_back(rank);
      if (group.second.empty()) group.second = value;
    }
    if (groups.size() == 1) continue;
    std::vector<std::pair<std::vector<size_t>, std::string>> ordered;  // by their first rank
    for (const auto& [compared, group] : groups) ordered.push_back(group);
    std::sort(ordered.begin(), ordered.end());
    std::vector<std::string> sides;
    for (const auto& [ranks, value] : ordered) {
      sides.push_back(str(ranks.size() > 1 ? "ranks " : "rank ", join(ranks, ", "), ": ", value));
    }
    lines.push_back(str(what, " differs between ranks: ", join(sides, "; ")));
  }
  if (lines.empty()) return std::nullopt;
  return join(lines, "\n");
}

void check_ranks_agree(const distributed::ProcessMesh& mesh, const std::string& key,
                       const RankIdentity& identity) {
  std::vector<RankIdentity> identities;
  for (const std::string& text : mesh.exchange(key, serialize(identity))) {
    identities.push_back(deserialize(text));
  }
  if (auto message = disagreement(identities)) {
    throw ConfigError(str("the ranks of this job do not run the same job (rank ", mesh.rank(),
                          " checked at the start): ", *message));
  }
}

}  // namespace shardformer::host

// The check, at the start of a multi-rank job, that every rank runs the same job: the same
// job config, host, LibTorch and plugin, compared through the rendezvous store.
#pragma once

#include "job_config.h"

#include "shardformer/distributed/process_mesh.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace shardformer::host {

// What one rank runs, as (what, value) pairs: ("job config", "fnv1a64 0123... of PATH"), ...
using RankIdentity = std::vector<std::pair<std::string, std::string>>;

// This rank's identity for `config`: the config file's bytes (a 64-bit FNV-1a hash), the host's
// version and SDK ABI and the LibTorch version.
RankIdentity job_identity(const JobConfig& config);

// Where the ranks' identities differ: "job config differs between ranks: rank 0, 2: fnv1a64 ..
// of a.toml; rank 1: fnv1a64 .. of b.toml", one line per part that differs; nullopt when they
// agree. Values are compared up to " of " (so the same file at two paths agrees).
std::optional<std::string> disagreement(const std::vector<RankIdentity>& identities);

// Exchanges `identity` through the mesh's store under `key` and throws ConfigError naming the
// ranks and the parts that differ. Every rank calls it, in the same order.
void check_ranks_agree(const distributed::ProcessMesh& mesh, const std::string& key,
                       const RankIdentity& identity);

}  // namespace shardformer::host

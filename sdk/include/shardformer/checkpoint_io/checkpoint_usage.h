// What building a model took from its checkpoint, and the check that nothing in it was
// silently ignored: every tensor is loaded or declared unused by the model, and every
// config.json key is read, declared ignorable, or one of HF's keys that change nothing here.
#pragma once

#include "shardformer/checkpoint_io/checkpoint.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace shardformer {

namespace distributed {
class ProcessGroup;
}

// Filled while a model is built (BuildContext::load and BuildContext::skip).
struct CheckpointUsage {
  std::set<std::string> loaded;                // checkpoint tensor names read into parameters
  std::map<std::string, std::string> skipped;  // known tensors left unused -> why
  std::vector<TensorView> views;  // the checkpoint's (Checkpoint::add_views): saves undo them
};

enum class UnusedAction {
  kError,  // the default: the job stops, listing what was not used
  kWarn,   // logged as a warning, the job goes on
};

struct UsagePolicy {
  UnusedAction tensors = UnusedAction::kError;
  UnusedAction config_keys = UnusedAction::kError;
};

// What a checkpoint holds that no rank used.
struct UnusedItems {
  std::vector<std::string> tensors;
  std::vector<std::string> config_keys;
  bool empty() const { return tensors.empty() && config_keys.empty(); }
};

// The tensors and config.json keys of `checkpoint` that no rank of `world` loaded, skipped
// or read (a pipeline stage loads only its layers: the check unions every rank's usage).
// Collective over `world` when it is not null; every rank gets the same answer.
UnusedItems find_unused(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                        const distributed::ProcessGroup* world);

// find_unused, then: with kError, throws CheckpointError naming the checkpoint and listing
// what was unused; with kWarn, logs the same as a warning. Collective like find_unused.
void check_checkpoint_usage(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                            const distributed::ProcessGroup* world, UsagePolicy policy);

}  // namespace shardformer

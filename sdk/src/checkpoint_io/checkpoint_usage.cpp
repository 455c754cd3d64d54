// The unused-checkpoint check: tensors no rank loaded or skipped, config.json keys no rank
// read, unioned over the ranks with one all-reduce.
#include "shardformer/checkpoint_io/checkpoint_usage.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <string_view>

namespace shardformer {
namespace {

// Marks, for each name, whether it was used on any rank of `world`.
std::vector<bool> used_anywhere(const std::vector<bool>& here,
                                const distributed::ProcessGroup* world) {
  if (world == nullptr || world->size() == 1 || here.empty()) return here;
  at::Tensor flags = at::empty({static_cast<int64_t>(here.size())}, at::kInt);
  auto a = flags.accessor<int32_t, 1>();
  for (size_t i = 0; i < here.size(); ++i) a[i] = here[i] ? 1 : 0;
  world->all_reduce_(flags, distributed::ReduceOp::kMax);
  std::vector<bool> result(here.size());
  for (size_t i = 0; i < here.size(); ++i) result[i] = a[i] != 0;
  return result;
}

std::string listing(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  std::vector<std::string> shown;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) shown.push_back("'" + names[i] + "'");
  return str(join(shown, ", "),
             names.size() > kShown ? str(" and ", names.size() - kShown, " more") : "");
}

}  // namespace

UnusedItems find_unused(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                        const distributed::ProcessGroup* world) {
  const std::vector<std::string> tensors = checkpoint.tensor_names();  // sorted: same order
  const std::vector<std::string> keys = checkpoint.config().keys();    // file order everywhere
  std::vector<bool> here;
  for (const std::string& name : tensors) {
    here.push_back(usage.loaded.count(name) > 0 || usage.skipped.count(name) > 0);
  }
  for (const std::string& key : keys) {
    here.push_back(harmless_config_key(checkpoint.config(), key) ||
                   checkpoint.config().was_read(key));
  }
  const std::vector<bool> used = used_anywhere(here, world);
  UnusedItems unused;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!used[i]) unused.tensors.push_back(tensors[i]);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!used[tensors.size() + i]) unused.config_keys.push_back(keys[i]);
  }
  return unused;
}

void check_checkpoint_usage(const Checkpoint& checkpoint, const CheckpointUsage& usage,
                            const distributed::ProcessGroup* world, UsagePolicy policy) {
  for (const auto& [name, why] : usage.skipped) {
    log::debug(str("checkpoint tensor '", name, "' left unused: ", why));
  }
  const UnusedItems unused = find_unused(checkpoint, usage, world);
  std::vector<std::string> errors, warnings;
  if (!unused.tensors.empty()) {
    (policy.tensors == UnusedAction::kError ? errors : warnings)
        .push_back(str(unused.tensors.size(),
                       " tensor(s) that no module of the model reads: ", listing(unused.tensors)));
  }
  if (!unused.config_keys.empty()) {
    (policy.config_keys == UnusedAction::kError ? errors : warnings)
        .push_back(str(checkpoint.config().path().filename().string(), " has ",
                       unused.config_keys.size(),
                       " key(s) that the model does not implement: ", listing(unused.config_keys)));
  }
  for (const std::string& w : warnings) {
    log::warn(str(checkpoint.directory().string(), ": ", w, " (ignored as the job config allows)"));
  }
  if (!errors.empty()) {
    throw CheckpointError(str(checkpoint.directory().string(), ": ", join(errors, "; "),
                              ". The model would silently differ from the checkpoint; set "
                              "[model] unused_tensors / unused_config_keys = \"warn\" in the "
                              "job config to run anyway"));
  }
}

}  // namespace shardformer

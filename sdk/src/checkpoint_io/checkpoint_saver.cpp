// HF-format checkpoint writing: gathering over tp, one file set per stage, the merged index.
#include "shardformer/checkpoint_io/checkpoint_saver.h"

#include "../json_file.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <fstream>

namespace shardformer {
namespace {

namespace fs = std::filesystem;

// Names in order, cut into files of at most max_bytes (a tensor larger alone gets a file).
std::vector<std::vector<std::string>> split_files(const std::map<std::string, at::Tensor>& tensors,
                                                  int64_t max_bytes) {
  std::vector<std::vector<std::string>> files;
  int64_t bytes = 0;
  for (const auto& [name, tensor] : tensors) {
    const auto size = static_cast<int64_t>(tensor.nbytes());
    if (files.empty() || (bytes + size > max_bytes && !files.back().empty())) {
      files.emplace_back();
      bytes = 0;
    }
    files.back().push_back(name);
    bytes += size;
  }
  return files;
}

std::string numbered(const std::string& stem, int64_t i, int64_t n) {
  char name[64];
  std::snprintf(name, sizeof(name), "-%05lld-of-%05lld.safetensors", static_cast<long long>(i),
                static_cast<long long>(n));
  return stem + name;
}

}  // namespace

void write_sharded_tensors(const fs::path& dir, const std::string& stem,
                           const std::map<std::string, at::Tensor>& tensors,
                           const distributed::ProcessGroup* world, int64_t max_file_bytes) {
  const auto files = split_files(tensors, max_file_bytes);
  const int rank = world != nullptr ? world->rank() : 0,
            size = world != nullptr ? world->size() : 1;
  at::Tensor counts = at::zeros({size}, at::kLong);  // files per rank
  counts[rank] = static_cast<int64_t>(files.size());
  if (world != nullptr) world->all_reduce_(counts);
  const int64_t total = counts.sum().item<int64_t>();
  const int64_t offset = counts.narrow(0, 0, rank).sum().item<int64_t>();
  if (total == 0) throw Error(str(dir.string(), ": nothing to save"));
  fs::create_directories(dir);
  for (size_t f = 0; f < files.size(); ++f) {
    std::map<std::string, at::Tensor> part;
    for (const std::string& name : files[f]) part.emplace(name, tensors.at(name));
    const std::string file = total == 1
                                 ? stem + ".safetensors"
                                 : numbered(stem, offset + static_cast<int64_t>(f) + 1, total);
    save_safetensors(dir / file, part, {{"format", "pt"}});
  }
  if (world != nullptr) world->barrier();
  if (rank != 0 || total == 1) return;
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  uint64_t total_size = 0;
  std::map<std::string, std::string> by_name;
  for (int64_t i = 1; i <= total; ++i) {
    const std::string file = numbered(stem, i, total);
    const SafetensorsFile written(dir / file);
    for (const TensorInfo& info : written.tensors()) {
      if (!by_name.emplace(info.name, file).second) {
        throw Error(str(dir.string(), ": tensor '", info.name, "' written twice"));
      }
      total_size += info.nbytes();
    }
  }
  for (const auto& [name, file] : by_name) weight_map[name] = file;
  const nlohmann::ordered_json index = {{"metadata", {{"total_size", total_size}}},
                                        {"weight_map", weight_map}};
  const fs::path path = dir / (stem + ".safetensors.index.json");
  std::ofstream(path) << index.dump(2) << "\n";
  sync_to_disk(path);
}

std::map<std::string, at::Tensor> tensors_to_write(const Model& model,
                                                   const std::map<std::string, at::Tensor>& values,
                                                   const distributed::ProcessMesh* mesh) {
  const distributed::ProcessGroup* tp = mesh != nullptr ? &mesh->tp() : nullptr;
  // Stages holding each shared pattern: the lowest one writes it.
  std::map<std::string, bool> write_shared;
  const auto& patterns = model.shared_patterns();
  if (mesh != nullptr && mesh->shape().pp > 1 && !patterns.empty()) {
    const int64_t stage = mesh->coordinate().pp;
    for (size_t i = 0; i < patterns.size(); ++i) {
      const std::vector<std::string> names = model.shared_parameters(i);
      // The lowest holding stage, as the max of negated stages (no holder: -pp).
      at::Tensor lowest = at::full({1}, names.empty() ? -mesh->shape().pp : -stage, at::kLong);
      mesh->pp().all_reduce_(lowest, distributed::ReduceOp::kMax);
      for (const std::string& name : names) write_shared[name] = -lowest.item<int64_t>() == stage;
    }
  }
  const bool writer = mesh == nullptr || (mesh->coordinate().tp == 0 &&
                                          mesh->coordinate().dp == 0 && mesh->coordinate().sp == 0);
  std::map<std::string, at::Tensor> result;
  for (const auto& [name, value] : values) {
    const auto shard = model.sharding().find(name);
    const at::Tensor full = shard == model.sharding().end() || tp == nullptr
                                ? value
                                : gather_shard(value.contiguous(), shard->second, *tp);
    const auto shared = write_shared.find(name);
    if (writer && (shared == write_shared.end() || shared->second)) result.emplace(name, full);
  }
  return result;
}

void save_model(const Model& model, const fs::path& config_json, const fs::path& dir,
                const distributed::ProcessMesh* mesh, int64_t max_file_bytes) {
  std::map<std::string, at::Tensor> values;
  for (const auto& item : model.named_parameters()) {
    values.emplace(item.key(), item.value().detach());
  }
  save_model(model, values, config_json, dir, mesh, max_file_bytes);
}

void save_model(const Model& model, const std::map<std::string, at::Tensor>& weights,
                const fs::path& config_json, const fs::path& dir,
                const distributed::ProcessMesh* mesh, int64_t max_file_bytes) {
  // In the layout the checkpoint was loaded from (a view's source under its own name).
  const auto tensors =
      join_views(tensors_to_write(model, weights, mesh), model.checkpoint_usage().views);
  write_sharded_tensors(dir, "model", tensors, mesh != nullptr ? &mesh->world() : nullptr,
                        max_file_bytes);
  if (mesh == nullptr || mesh->rank() == 0) {
    fs::copy_file(config_json, dir / "config.json", fs::copy_options::overwrite_existing);
    sync_to_disk(dir / "config.json");
  }
}

}  // namespace shardformer

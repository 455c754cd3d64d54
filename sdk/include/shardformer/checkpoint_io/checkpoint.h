// A HuggingFace checkpoint folder: config.json plus safetensors weights, either one
// model.safetensors or shards listed in model.safetensors.index.json.
#pragma once

#include "shardformer/checkpoint_io/hf_config.h"
#include "shardformer/checkpoint_io/safetensors.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardformer {

class Checkpoint {
 public:
  // Opens the folder: parses config.json, opens model.safetensors, or the index and every
  // shard it names. Throws CheckpointError for a missing config or weights file, an index
  // that names a missing shard, a tensor listed in the index but absent from its shard, or
  // a tensor present in two shards.
  // stem: the weight files' name, "model" for HF's (a training state's optimizer moments are
  // stored the same way under "optimizer").
  explicit Checkpoint(const std::filesystem::path& directory, const std::string& stem = "model");

  const std::filesystem::path& directory() const { return directory_; }
  const HFConfig& config() const { return config_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  bool contains(const std::string& name) const;
  // The names of every tensor, sorted.
  std::vector<std::string> tensor_names() const;
  // Throws CheckpointError naming the folder (and listing near names) when absent.
  const TensorInfo& info(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;

  at::Tensor read(const std::string& name) const;
  at::Tensor read_rows(const std::string& name, int64_t start, int64_t length) const;
  at::Tensor read_slice(const std::string& name, int64_t dim, int64_t start, int64_t length) const;
  void read_slice_into(const std::string& name, int64_t dim, int64_t start, int64_t length,
                       const at::Tensor& out) const;

  uint64_t total_bytes() const;
  int64_t total_numel() const;

 private:
  std::filesystem::path directory_;
  HFConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> owner_;
};

}  // namespace shardformer

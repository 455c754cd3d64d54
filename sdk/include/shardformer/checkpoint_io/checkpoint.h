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

// A tensor of a checkpoint stored under another layout's names, seen under the family's own:
// rows [first_row, first_row + rows) of `source` (one part of a fused tensor), or the whole of
// it when rows < 0 (a rename).
struct TensorView {
  std::string name;
  std::string source;
  int64_t first_row = 0;
  int64_t rows = -1;
};

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

  // Serves a checkpoint stored under another layout's names (ChatGLM's original files) under
  // the family's own, before the model is built: each view becomes a tensor of its name, read
  // from its source's bytes as any tensor is (in place where aligned), and the sources leave
  // tensor_names(), so the usage check counts the views. Every source must exist and its views
  // cover each of its rows exactly once. Throws CheckpointError naming the folder and source.
  void add_views(const std::vector<TensorView>& views);
  // Those views, with rows resolved (never negative), in the order given.
  const std::vector<TensorView>& views() const { return views_; }
  // 'name', and for a view the rows of the stored tensor it is: for error messages.
  std::string describe(const std::string& name) const;

 private:
  std::filesystem::path directory_;
  HFConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> owner_;
  std::vector<TensorView> views_;
};

// What add_views undoes when a model is saved: each source whose views are all in `tensors` is
// put back together (rows in order) under its own name, so a saved checkpoint has the layout it
// was loaded from. Throws ModelError when `tensors` holds only some of a source's views.
std::map<std::string, at::Tensor> join_views(std::map<std::string, at::Tensor> tensors,
                                             const std::vector<TensorView>& views);

}  // namespace shardformer

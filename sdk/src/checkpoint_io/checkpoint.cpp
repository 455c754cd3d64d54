// Checkpoint: a HuggingFace checkpoint folder (config.json and one or several safetensors
// files), with every tensor name resolved to the file that holds it.
#include "shardformer/checkpoint_io/checkpoint.h"

#include "../json_file.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <algorithm>
#include <system_error>

namespace shardformer {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxSuggestions = 3;

// The path's status; a path that cannot be looked up (too long, in a folder without permission)
// is a CheckpointError naming it, not std::filesystem's exception.
fs::file_status status_of(const fs::path& path) {
  std::error_code error;
  fs::file_status status = fs::status(path, error);
  if (error && status.type() != fs::file_type::not_found) {
    throw CheckpointError(str(path.string(), ": cannot look up the path: ", error.message()));
  }
  return status;
}

// Shard file name -> the tensor names the index maps to it.
using WeightMap = std::map<std::string, std::vector<std::string>>;

WeightMap read_weight_map(const fs::path& index) {
  nlohmann::json json = detail::read_json_file(index);
  auto it = json.is_object() ? json.find("weight_map") : json.end();
  if (it == json.end() || !it->is_object()) {
    throw CheckpointError(str(index.string(), ": expected an object with a 'weight_map' object"));
  }
  WeightMap shards;
  for (const auto& [name, shard] : it->items()) {
    // A NUL would cut the path short: the file opened would not be the one named.
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
      throw CheckpointError(str(index.string(), ": 'weight_map' entry '", name,
                                "' must be a file name in the folder, found ",
                                detail::describe_json(shard)));
    }
    shards[shard.get<std::string>()].push_back(name);
  }
  return shards;
}

std::vector<std::unique_ptr<SafetensorsFile>> open_shards(const fs::path& directory,
                                                          const fs::path& index) {
  const WeightMap weight_map = read_weight_map(index);
  std::map<std::string, std::string> shard_of;  // tensor name -> the shard the index names
  for (const auto& [shard, names] : weight_map) {
    for (const std::string& name : names) shard_of[name] = shard;
  }
  std::vector<std::unique_ptr<SafetensorsFile>> files;
  for (const auto& [shard, names] : weight_map) {
    const fs::path path = directory / shard;
    std::error_code error;  // set for a missing file too
    const fs::file_status status = fs::status(path, error);
    if (error && status.type() != fs::file_type::not_found) {  // e.g. a name too long
      throw CheckpointError(str(index.string(), ": shard ", path.string(), " (holding '",
                                names.front(), "') cannot be opened: ", error.message()));
    }
    if (!fs::is_regular_file(status)) {
      throw CheckpointError(
          str(index.string(), ": shard ", path.string(), " (holding '", names.front(), "'",
              names.size() > 1 ? str(" and ", names.size() - 1, " more tensors") : std::string(),
              ") does not exist"));
    }
    auto file = std::make_unique<SafetensorsFile>(path);
    for (const std::string& name : names) {
      if (!file->contains(name)) {
        throw CheckpointError(str(index.string(), ": tensor '", name, "' is mapped to ",
                                  path.string(), " but that file does not contain it"));
      }
    }
    // A tensor the index does not list is one the index's writer did not mean to ship.
    for (const TensorInfo& info : file->tensors()) {
      const auto listed = shard_of.find(info.name);
      if (listed == shard_of.end() || listed->second != shard) {
        throw CheckpointError(str(index.string(), ": ", path.string(), " holds tensor '", info.name,
                                  "', which the index's 'weight_map' ",
                                  listed == shard_of.end()
                                      ? std::string("does not list")
                                      : str("maps to ", listed->second, " instead")));
      }
    }
    files.push_back(std::move(file));
  }
  return files;
}

std::vector<std::unique_ptr<SafetensorsFile>> open_weights(const fs::path& directory,
                                                           const std::string& stem) {
  const std::string single_file = stem + ".safetensors",
                    index_file = stem + ".safetensors.index.json";
  const fs::path single = directory / single_file;
  const fs::path index = directory / index_file;
  if (fs::exists(status_of(single))) {
    std::vector<std::unique_ptr<SafetensorsFile>> files;
    files.push_back(std::make_unique<SafetensorsFile>(single));
    return files;
  }
  if (fs::exists(status_of(index))) return open_shards(directory, index);
  throw CheckpointError(
      str(directory.string(), ": no weights found: looked for ", single_file, " and ", index_file));
}

// Characters two names share at their start and at their end (at most the shorter length), so
// that 'h.8.ln_1.weight' is nearest to 'h.7.ln_1.weight', not to every other 'h.' name.
size_t shared_affix(const std::string& a, const std::string& b) {
  auto prefix = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  auto suffix = std::mismatch(a.rbegin(), a.rend(), b.rbegin(), b.rend()).first - a.rbegin();
  return std::min(size_t(prefix + suffix), std::min(a.size(), b.size()));
}

// Up to kMaxSuggestions of `names` sharing the most leading and trailing characters with `name`.
std::vector<std::string> near_names(const std::string& name,
                                    const std::map<std::string, const SafetensorsFile*>& names) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& entry : names) {
    if (size_t score = shared_affix(name, entry.first); score > 0) {
      scored.emplace_back(score, entry.first);
    }
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> result;
  for (size_t i = 0; i < std::min(scored.size(), kMaxSuggestions); ++i) {
    result.push_back("'" + scored[i].second + "'");
  }
  return result;
}

}  // namespace

Checkpoint::Checkpoint(const std::filesystem::path& directory, const std::string& stem)
    : directory_(directory) {
  const fs::file_status status = status_of(directory);
  if (!fs::is_directory(status)) {
    throw CheckpointError(str(directory.string(), fs::exists(status)
                                                      ? ": the checkpoint path is not a folder"
                                                      : ": checkpoint folder does not exist"));
  }
  config_ = HFConfig::load(directory / "config.json");
  files_ = open_weights(directory, stem);
  for (const auto& file : files_) {
    for (const TensorInfo& info : file->tensors()) {
      auto [it, inserted] = owner_.emplace(info.name, file.get());
      if (!inserted) {
        throw CheckpointError(str(directory.string(), ": tensor '", info.name,
                                  "' is present in both ", it->second->path().string(), " and ",
                                  file->path().string()));
      }
    }
  }
}

bool Checkpoint::contains(const std::string& name) const { return owner_.count(name) > 0; }

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  names.reserve(owner_.size());
  for (const auto& entry : owner_) names.push_back(entry.first);
  return names;
}

const SafetensorsFile& Checkpoint::file_of(const std::string& name) const {
  auto it = owner_.find(name);
  if (it != owner_.end()) return *it->second;
  std::vector<std::string> near = near_names(name, owner_);
  throw CheckpointError(str(directory_.string(), ": no tensor named '", name, "' in the checkpoint",
                            near.empty() ? "" : str("; did you mean ", join(near, ", "), "?")));
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  return file_of(name).info(name);
}

at::Tensor Checkpoint::read(const std::string& name) const { return file_of(name).read(name); }

at::Tensor Checkpoint::read_rows(const std::string& name, int64_t start, int64_t length) const {
  return file_of(name).read_rows(name, start, length);
}

at::Tensor Checkpoint::read_slice(const std::string& name, int64_t dim, int64_t start,
                                  int64_t length) const {
  return file_of(name).read_slice(name, dim, start, length);
}

void Checkpoint::read_slice_into(const std::string& name, int64_t dim, int64_t start,
                                 int64_t length, const at::Tensor& out) const {
  file_of(name).read_slice_into(name, dim, start, length, out);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t total = 0;
  for (const auto& file : files_) {
    for (const TensorInfo& info : file->tensors()) total += info.nbytes();
  }
  return total;
}

int64_t Checkpoint::total_numel() const {
  int64_t total = 0;
  for (const auto& file : files_) {
    for (const TensorInfo& info : file->tensors()) total += info.numel();
  }
  return total;
}

}  // namespace shardformer

// Checkpoint description: architecture, serving plugin, parameter count, dtypes, tensor table.
#include "inspect.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <iomanip>
#include <map>
#include <ostream>

namespace shardformer::host {

void inspect_checkpoint(const std::filesystem::path& directory, const PluginRegistry& registry,
                        std::ostream& out) {
  const Checkpoint checkpoint(directory);
  const auto architectures = checkpoint.config().architectures();
  out << "checkpoint:    " << directory.string() << "\n";
  out << "model_type:    " << checkpoint.config().model_type() << "\n";
  out << "architectures: " << (architectures.empty() ? "(none)" : join(architectures, ", "))
      << "\n";
  for (const auto& architecture : architectures) {
    try {
      const PluginInfo& plugin = registry.find(architecture);
      out << "plugin:        " << architecture << " -> '" << plugin.name << "' " << plugin.version
          << " (" << plugin.file.string() << ")\n";
    } catch (const PluginError&) {
      out << "plugin:        " << architecture << " -> none on the plugin search path\n";
    }
  }

  std::map<std::string, std::pair<int64_t, uint64_t>> by_dtype;  // dtype -> (numel, bytes)
  for (const auto& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    by_dtype[info.dtype_name].first += info.numel();
    by_dtype[info.dtype_name].second += info.nbytes();
  }
  out << "files:         " << checkpoint.files().size() << "\n";
  out << "tensors:       " << checkpoint.tensor_names().size() << "\n";
  out << "parameters:    " << checkpoint.total_numel() << "\n";
  out << "total bytes:   " << checkpoint.total_bytes() << "\n";
  for (const auto& [dtype, counts] : by_dtype) {
    out << "dtype " << std::left << std::setw(8) << dtype << " " << counts.first << " elements, "
        << counts.second << " bytes\n";
  }
  out << "\n"
      << std::left << std::setw(48) << "tensor" << std::setw(6) << "dtype" << std::setw(20)
      << "shape"
      << "file\n";
  for (const auto& name : checkpoint.tensor_names()) {
    const TensorInfo& info = checkpoint.info(name);
    out << std::left << std::setw(48) << name << std::setw(6) << info.dtype_name << std::setw(20)
        << shape_str(info.shape) << checkpoint.file_of(name).path().filename().string() << "\n";
  }
}

}  // namespace shardformer::host

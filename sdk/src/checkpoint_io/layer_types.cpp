// Reads a per-layer list of attention kinds from config.json.
#include "shardformer/checkpoint_io/layer_types.h"

#include "shardformer/strings.h"

namespace shardformer {

std::optional<std::vector<bool>> windowed_layers(const HFConfig& c, const std::string& key,
                                                 int64_t num_layers, const std::string& global,
                                                 const std::string& local) {
  const std::optional<std::vector<std::string>> types = c.get_string_list(key);
  if (!types) return std::nullopt;
  c.require(static_cast<int64_t>(types->size()) == num_layers,
            str(key, " lists ", types->size(), " layers, the model has ", num_layers));
  std::vector<bool> windowed;
  for (size_t i = 0; i < types->size(); ++i) {
    const std::string& t = (*types)[i];
    c.require(t == global || t == local,
              str(key, "[", i, "] = '", t, "' (", global, " or ", local, ")"));
    windowed.push_back(t == local);
  }
  return windowed;
}

}  // namespace shardformer

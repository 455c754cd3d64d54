// Loading plugin libraries with Boost.DLL and validating their descriptors.
#include "plugin_registry.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/plugin.h"
#include "shardformer/strings.h"

#include <torch/version.h>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <cxxabi.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>

namespace shardformer::host {

namespace fs = std::filesystem;

struct LoadedPlugin {
  PluginInfo info;
  std::shared_ptr<boost::dll::shared_library> library;
  const ShardformerPluginDescriptor* descriptor = nullptr;
};

struct PluginRegistry::Impl {
  std::vector<fs::path> search_path;
  std::vector<LoadedPlugin> loaded;
  std::vector<PluginInfo> infos;
  std::vector<PluginFailure> failures;
  std::map<std::string, size_t> by_architecture;  // architecture -> index into loaded
};

namespace {

// Why dlopen refused a library, in its own words (Boost.DLL's error code says only "bad file
// descriptor"). An undefined symbol, what a plugin built against another SDK or LibTorch than
// the host's meets, is demangled and said so.
std::string load_failure(const std::error_code& ec) {
  const char* text = dlerror();
  std::string why = text != nullptr ? text : ec.message();
  const std::string marker = "undefined symbol: ";
  const size_t at = why.find(marker);
  if (at == std::string::npos) return why;
  const std::string symbol = why.substr(at + marker.size());
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), std::free);
  return str("undefined symbol ", status == 0 ? name.get() : symbol, " (", symbol,
             "): it was built against another shardformer SDK or LibTorch than this host's;"
             " rebuild it against this one");
}

std::string abi_str(uint32_t major, uint32_t minor) { return str(major, ".", minor); }

// Why the descriptor cannot be used by this host, or "" when it can.
std::string check_descriptor(const ShardformerPluginDescriptor& d) {
  const std::string host_abi = abi_str(SHARDFORMER_ABI_MAJOR, SHARDFORMER_ABI_MINOR);
  const std::string plugin_abi = abi_str(d.abi_major, d.abi_minor);
  if (d.abi_major != SHARDFORMER_ABI_MAJOR) {
    return str("incompatible SDK ABI: plugin built for ", plugin_abi, ", host provides ", host_abi,
               " (major versions differ; rebuild the plugin against this SDK)");
  }
  if (d.abi_minor > SHARDFORMER_ABI_MINOR) {
    return str("plugin needs a newer SDK ABI: plugin built for ", plugin_abi, ", host provides ",
               host_abi, " (upgrade the host)");
  }
  const std::string plugin_torch = d.torch_version ? d.torch_version : "(none)";
  if (plugin_torch != TORCH_VERSION) {
    return str("LibTorch mismatch: plugin built with LibTorch ", plugin_torch,
               ", host uses LibTorch ", TORCH_VERSION);
  }
  if (d.cxx11_abi != _GLIBCXX_USE_CXX11_ABI) {
    return str("C++ ABI mismatch: plugin built with _GLIBCXX_USE_CXX11_ABI=", d.cxx11_abi,
               ", host with _GLIBCXX_USE_CXX11_ABI=", _GLIBCXX_USE_CXX11_ABI);
  }
  if (d.name == nullptr || *d.name == '\0') return "descriptor has no plugin name";
  if (d.num_architectures == 0 || d.architectures == nullptr) {
    return "descriptor lists no architectures";
  }
  if (d.create_model == nullptr || d.destroy_model == nullptr) {
    return "descriptor has no create_model/destroy_model function";
  }
  return "";
}

PluginInfo info_of(const fs::path& file, const ShardformerPluginDescriptor& d) {
  const auto text = [](const char* s) { return std::string(s ? s : ""); };
  PluginInfo info{file,
                  text(d.name),
                  text(d.version),
                  text(d.description),
                  text(d.sdk_version),
                  text(d.torch_version),
                  d.abi_major,
                  d.abi_minor,
                  d.cxx11_abi,
                  {}};
  for (uint32_t i = 0; i < d.num_architectures; ++i) {
    info.architectures.push_back(text(d.architectures[i]));
  }
  return info;
}

}  // namespace

PluginRegistry::PluginRegistry() : impl_(std::make_unique<Impl>()) {}
PluginRegistry::~PluginRegistry() = default;
PluginRegistry::PluginRegistry(PluginRegistry&&) noexcept = default;
PluginRegistry& PluginRegistry::operator=(PluginRegistry&&) noexcept = default;

PluginRegistry PluginRegistry::discover(const std::vector<fs::path>& search_path) {
  PluginRegistry registry;
  Impl& impl = *registry.impl_;
  impl.search_path = search_path;
  const auto refuse = [&](const fs::path& file, const std::string& reason) {
    log::warn(str("plugin ", file.string(), " refused: ", reason));
    impl.failures.push_back({file, reason});
  };

  std::set<fs::path> searched;  // a folder named twice (in the config and by default) once
  for (const fs::path& dir : search_path) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec) || !searched.insert(fs::weakly_canonical(dir, ec)).second) {
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".so") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      auto library = std::make_shared<boost::dll::shared_library>();
      std::error_code load_error;
      library->load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local,
                    load_error);
      if (load_error) {
        refuse(file, "not a loadable shared library: " + load_failure(load_error));
        continue;
      }
      if (!library->has(SHARDFORMER_PLUGIN_ENTRY_NAME)) {
        refuse(file, str("not a shardformer plugin: missing entry point '",
                         SHARDFORMER_PLUGIN_ENTRY_NAME, "'"));
        continue;
      }
      auto& entry =
          library->get<const ShardformerPluginDescriptor*()>(SHARDFORMER_PLUGIN_ENTRY_NAME);
      const ShardformerPluginDescriptor* descriptor = entry();
      if (descriptor == nullptr) {
        refuse(file, "entry point returned no descriptor (the plugin failed to initialise)");
        continue;
      }
      if (std::string reason = check_descriptor(*descriptor); !reason.empty()) {
        refuse(file, reason);
        continue;
      }
      PluginInfo info = info_of(file, *descriptor);
      std::string clash;
      for (const auto& architecture : info.architectures) {
        if (auto it = impl.by_architecture.find(architecture); it != impl.by_architecture.end()) {
          const PluginInfo& owner = impl.loaded[it->second].info;
          clash = str("duplicate architecture '", architecture, "': already served by plugin '",
                      owner.name, "' ", owner.version, " (", owner.file.string(), ")");
          break;
        }
      }
      if (!clash.empty()) {
        refuse(file, clash);
        continue;
      }
      // Objects made by plugin code (modules, autograd nodes, tensor deleters) can outlive any
      // model handle; an accepted plugin therefore stays mapped until the process ends.
      ::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
      for (const auto& architecture : info.architectures) {
        impl.by_architecture[architecture] = impl.loaded.size();
      }
      log::debug(str("plugin '", info.name, "' ", info.version, " loaded from ", file.string()));
      impl.infos.push_back(info);
      impl.loaded.push_back({std::move(info), std::move(library), descriptor});
    }
  }
  return registry;
}

const std::vector<PluginInfo>& PluginRegistry::plugins() const { return impl_->infos; }
const std::vector<PluginFailure>& PluginRegistry::failures() const { return impl_->failures; }
const std::vector<fs::path>& PluginRegistry::search_path() const { return impl_->search_path; }

const PluginInfo& PluginRegistry::find(const std::string& architecture) const {
  auto it = impl_->by_architecture.find(architecture);
  if (it != impl_->by_architecture.end()) return impl_->loaded[it->second].info;
  std::vector<std::string> known;
  for (const auto& [name, index] : impl_->by_architecture) known.push_back(name);
  std::vector<std::string> dirs;
  for (const auto& dir : impl_->search_path) dirs.push_back(dir.string());
  // The plugin meant to serve it may be one that was found and refused.
  std::vector<std::string> refused;
  for (const auto& failure : impl_->failures) {
    refused.push_back(str(failure.file.string(), ": ", failure.reason));
  }
  throw PluginError(
      str("unknown architecture '", architecture, "': no plugin serves it. Known: ",
          known.empty() ? "(none)" : join(known, ", "), ". Plugin search path: ", join(dirs, ":"),
          refused.empty() ? std::string() : str(". Refused plugins: ", join(refused, "; "))));
}

std::shared_ptr<Model> PluginRegistry::create_model(const ModelArgs& args) const {
  const PluginInfo& info = find(args.architecture);
  const LoadedPlugin& plugin = impl_->loaded[impl_->by_architecture.at(args.architecture)];
  char error[4096] = {0};
  ShardformerModel* handle = plugin.descriptor->create_model(
      reinterpret_cast<const ShardformerModelArgs*>(&args), error, sizeof(error));
  if (handle == nullptr) {
    throw ModelError(str("plugin '", info.name, "' could not build ", args.architecture, ": ",
                         error[0] ? error : "(no message)"));
  }
  // The returned pointer shares ownership of the handle; the deleter keeps the library loaded
  // until the model, whose code lives in it, is gone.
  auto destroy = plugin.descriptor->destroy_model;
  auto owner = std::shared_ptr<ShardformerModel>(
      handle, [destroy, library = plugin.library](ShardformerModel* h) { destroy(h); });
  Model* model = reinterpret_cast<ModelHandle*>(handle)->model.get();
  return std::shared_ptr<Model>(owner, model);
}

std::vector<fs::path> plugin_search_path(const std::vector<fs::path>& configured) {
  std::vector<fs::path> path = configured;
  if (const char* env = std::getenv("SHARDFORMER_PLUGIN_PATH")) {
    std::stringstream entries(env);
    for (std::string dir; std::getline(entries, dir, ':');) {
      if (!dir.empty()) path.emplace_back(dir);
    }
  }
  const fs::path host_dir = boost::dll::program_location().parent_path();
  path.push_back(host_dir / "plugins");
  path.push_back((host_dir / ".." / "lib" / "shardformer" / "plugins").lexically_normal());
  return path;
}

}  // namespace shardformer::host

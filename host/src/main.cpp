// shardformer-host: the command line. Verbs: run (a job config), plugins (list what is
// discovered), inspect (describe a checkpoint). Every verb has --help.
#include "inspect.h"
#include "job_config.h"
#include "jobs.h"
#include "plugin_registry.h"

#include "shardformer/error.h"
#include "shardformer/log.h"
#include "shardformer/runtime/cpu_products.h"
#include "shardformer/strings.h"
#include "shardformer/version.h"

#include <torch/version.h>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/program_options.hpp>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace shardformer;

namespace {

const auto main_started = std::chrono::steady_clock::now();

// Seconds since this process started (the kernel's start time, in clock ticks since boot, against
// the system's uptime): includes the dynamic loading and LibTorch's static initialisation that
// run before main(). Negative when /proc cannot tell.
double seconds_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  std::getline(stat, line);
  const size_t comm_end = line.rfind(')');  // the command name may hold spaces
  std::istringstream fields(comm_end == std::string::npos ? "" : line.substr(comm_end + 2));
  std::string field;
  for (int i = 3; i <= 22; ++i) fields >> field;  // after the name: fields 3 to 22 (starttime)
  double up = -1.0;
  uptime >> up;
  const long ticks = ::sysconf(_SC_CLK_TCK);
  if (!fields || up < 0 || ticks <= 0) return -1.0;
  return up - std::stod(field) / static_cast<double>(ticks);
}

// The job `run` performs without a config (configs/smollm2_chat.toml's): the real chat model
// SmolLM2-135M-Instruct, which tools/setup.sh converts and the build links next to the host
// binary, answering a message over 2 tensor-parallel ranks, the answer streamed.
constexpr const char* kEmbeddedDefaultConfig = R"toml(
[model]
path = "models/SmolLM2-135M-Instruct"

[parallel]
tp_size = 2

[job]
mode = "generate"

[generate]
messages = [{ role = "user", content = "What is the capital of France?" }]
max_new_tokens = 64
)toml";

constexpr const char* kUsage =
    "usage: shardformer-host <verb> [options]\n"
    "\n"
    "verbs:\n"
    "  run [CONFIG.toml]    run a job (forward, generate); without CONFIG, the embedded default\n"
    "  plugins              list the plugins found on the plugin search path\n"
    "  inspect CHECKPOINT   describe a HuggingFace checkpoint folder\n"
    "\n"
    "  shardformer-host <verb> --help   options of a verb\n"
    "  shardformer-host --version       versions of the host, SDK ABI and LibTorch; the CPU GEMM\n";

struct Parsed {
  po::variables_map vars;
  bool help = false;
};

// Parses the verb's arguments; positional is the name of the verb's one positional argument.
Parsed parse_verb(int argc, char** argv, po::options_description& options, const char* positional) {
  options.add_options()("help,h", "show this help");
  po::positional_options_description positionals;
  if (positional) positionals.add(positional, 1);
  Parsed parsed;
  po::store(po::command_line_parser(argc, argv).options(options).positional(positionals).run(),
            parsed.vars);
  po::notify(parsed.vars);
  parsed.help = parsed.vars.count("help") > 0;
  return parsed;
}

void add_plugin_dir_option(po::options_description& options) {
  options.add_options()("plugin-dir", po::value<std::vector<std::string>>()->composing(),
                        "folder searched for plugins before SHARDFORMER_PLUGIN_PATH and the "
                        "default (repeatable)");
}

std::vector<fs::path> plugin_dirs(const po::variables_map& vars,
                                  const std::vector<fs::path>& configured = {}) {
  std::vector<fs::path> dirs;
  if (vars.count("plugin-dir")) {
    for (const auto& dir : vars["plugin-dir"].as<std::vector<std::string>>())
      dirs.emplace_back(dir);
  }
  dirs.insert(dirs.end(), configured.begin(), configured.end());
  return host::plugin_search_path(dirs);
}

// Starts `world` local ranks running this same command and waits for them; a failing rank
// stops the others, and the job reports the error that caused it.
int launch_ranks(int argc, char** argv, int64_t world) {
  std::vector<std::string> command{boost::dll::program_location().string(), "run"};
  for (int i = 1; i < argc; ++i) command.emplace_back(argv[i]);
  log::info(str("starting ", world, " local ranks"));
  const host::RankErrorFolder errors;
  host::LaunchOptions options;
  options.world_size = static_cast<int>(world);
  const host::LaunchResult result = host::launch_local_ranks(command, options);
  if (result.exit_code == 0) return 0;
  // The job exits with the status of the rank whose error came first, not of the peers whose
  // collectives failed after it.
  const host::RankErrorFolder::RecordedError cause = errors.first_error();
  const std::vector<std::string> activities =
      errors.rank_activities(options.world_size, result.exit_code > 128 ? result.failed_rank : -1);
  const std::string doing = activities.empty() ? std::string()
                                               : "\nwhat the ranks were doing, the first to stop "
                                                 "first:\n  " +
                                                     join(activities, "\n  ");
  // A rank the launcher saw killed by a signal is the cause; the errors recorded by its peers,
  // whose collectives broke, come after.
  if (cause.text.empty() || result.exit_code > 128) {
    log::error(str("job failed: ", result.message,
                   cause.text.empty() ? std::string() : str("; then ", cause.text), doing));
    return result.exit_code;
  }
  log::error(str("job failed: ", cause.text, " (", result.message, ")", doing));
  return cause.exit_code;
}

int verb_run(int argc, char** argv) {
  po::options_description options("shardformer-host run [CONFIG.toml] [options]");
  options.add_options()("config", po::value<std::string>(),
                        "job config (TOML); see docs/config.md")(
      "log-level", po::value<std::string>(), "trace|debug|info|warn|error|off (overrides [log])")(
      "repeat", po::value<int64_t>()->default_value(1),
      "run the job N times in the same processes, logging open files, sockets and RSS after "
      "each (a leak check)");
  add_plugin_dir_option(options);
  const Parsed parsed = parse_verb(argc, argv, options, "config");
  if (parsed.help) {
    std::cout << options
              << "\nWithout CONFIG, runs the embedded default: SmolLM2-135M-Instruct "
                 "answering a chat message at tp = 2 (configs/smollm2_chat.toml).\n";
    return 0;
  }
  const int64_t repeat = parsed.vars["repeat"].as<int64_t>();
  if (repeat < 1) throw po::error(str("--repeat must be >= 1, got ", repeat));
  const host::JobConfig config =
      parsed.vars.count("config")
          ? host::load_job_config(parsed.vars["config"].as<std::string>())
          : host::parse_job_config(kEmbeddedDefaultConfig, "<embedded default config>",
                                   boost::dll::program_location().parent_path());
  const std::string level = parsed.vars.count("log-level")
                                ? parsed.vars["log-level"].as<std::string>()
                                : config.log.level;
  const std::optional<host::RankEnv> rank_env = host::rank_env_from_environment();
  log::init(rank_env ? rank_env->rank : 0, log::parse_level(level));
  const int64_t world = host::job_world_size(config);
  const host::JobInputs inputs = rank_env ? host::JobInputs{} : host::check_job_inputs(config);
  if (world > 1 && !rank_env) return launch_ranks(argc, argv, world);
  log::info(str("job ", config.source.string(), ": mode ", host::job_mode_name(config.mode)));
  const auto registry =
      host::PluginRegistry::discover(plugin_dirs(parsed.vars, config.plugins.paths));
  host::run_job(config, registry, rank_env, std::cout,
                {.repeat = repeat, .inputs = rank_env ? nullptr : &inputs});
  // In-process time of the whole job (bench/bench_speed.py reads it for start to first token).
  log::info(str(
      "job finished ",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - main_started).count(),
      " s after main() started, ", seconds_since_process_start(), " s after the process started"));
  return 0;
}

int verb_plugins(int argc, char** argv) {
  po::options_description options("shardformer-host plugins [options]");
  add_plugin_dir_option(options);
  const Parsed parsed = parse_verb(argc, argv, options, nullptr);
  if (parsed.help) {
    std::cout << options;
    return 0;
  }
  const auto registry = host::PluginRegistry::discover(plugin_dirs(parsed.vars));
  std::cout << "search path: " << join(registry.search_path(), ":") << "\n";
  for (const auto& p : registry.plugins()) {
    std::cout << p.name << " " << p.version << "  (SDK ABI " << p.abi_major << "." << p.abi_minor
              << ", LibTorch " << p.torch_version << ")\n"
              << "  architectures: " << join(p.architectures, ", ") << "\n"
              << "  file: " << p.file.string() << "\n";
  }
  for (const auto& f : registry.failures()) {
    std::cout << "refused " << f.file.string() << ": " << f.reason << "\n";
  }
  if (registry.plugins().empty()) std::cout << "no plugins found\n";
  return 0;
}

int verb_inspect(int argc, char** argv) {
  po::options_description options("shardformer-host inspect CHECKPOINT_DIR [options]");
  options.add_options()("checkpoint", po::value<std::string>(), "HF checkpoint folder");
  add_plugin_dir_option(options);
  const Parsed parsed = parse_verb(argc, argv, options, "checkpoint");
  if (parsed.help) {
    std::cout << options;
    return 0;
  }
  if (!parsed.vars.count("checkpoint")) throw ConfigError("inspect: no CHECKPOINT_DIR given");
  const auto registry = host::PluginRegistry::discover(plugin_dirs(parsed.vars));
  host::inspect_checkpoint(parsed.vars["checkpoint"].as<std::string>(), registry, std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string verb = argc > 1 ? argv[1] : "";
  try {
    if (verb == "run") return verb_run(argc - 1, argv + 1);
    if (verb == "plugins") return verb_plugins(argc - 1, argv + 1);
    if (verb == "inspect") return verb_inspect(argc - 1, argv + 1);
    if (verb == "--version") {
      std::cout << "shardformer-host " << SHARDFORMER_VERSION_STRING << " (SDK ABI "
                << SHARDFORMER_ABI_MAJOR << "." << SHARDFORMER_ABI_MINOR << ", LibTorch "
                << TORCH_VERSION << ")\n"
                << "CPU products: " << runtime::cpu_products() << "\n";
      return 0;
    }
    if (verb == "--help" || verb == "-h" || verb == "help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << (verb.empty() ? "no verb given" : "unknown verb '" + verb + "'") << "\n\n"
              << kUsage;
    return kExitUsage;
  } catch (const po::error& e) {
    std::cerr << "error: " << verb << ": " << e.what() << " (see shardformer-host " << verb
              << " --help)\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    log::error(e.what());
    if (!log::enabled(log::Level::kError)) std::cerr << "error: " << e.what() << "\n";
    return exit_code_for(e);
  }
}

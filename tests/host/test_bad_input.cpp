// The bad-input table of docs/reliability.md, end to end: each case breaks one input (the job
// config, config.json, a safetensors file or index, a plugin, the job's token ids) in a fresh
// folder, runs shardformer-host on it and checks its exit status and the one error it prints.
#include "test_env.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace shardformer::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr auto kRunTimeout = std::chrono::seconds(60);

fs::path plugin_case(const std::string& name) {
  return testing::binary_dir() / "tests/host/plugin_cases" / name;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// How the host is run for a case: its arguments, and whether a root user must lose the
// permission to read files it does not own (so that a chmod 000 file is unreadable to it too).
struct HostRun {
  std::vector<std::string> args;
  bool without_read_override = false;
  std::vector<std::string> env = {};  // NAME=VALUE set for the host alone
};

// The folder a case breaks its inputs in.
class Workspace {
 public:
  explicit Workspace(fs::path dir) : dir_(std::move(dir)) {}

  const fs::path& dir() const { return dir_; }
  fs::path model() const { return dir_ / "model"; }

  // Copies one of the build's tiny checkpoints (made by tools/) to dir/model.
  void copy_model(const std::string& name = "tiny-gpt2") const {
    fs::copy(models_dir() / name, model(), fs::copy_options::recursive);
  }

  fs::path write(const std::string& name, const std::string& text) const {
    write_file(dir_ / name, text);
    return dir_ / name;
  }

  static void edit_json(const fs::path& path, const std::function<void(json&)>& edit) {
    json value = json::parse(read_file(path));
    edit(value);
    write_file(path, value.dump(2));
  }

  // Rewrites a safetensors file with `edit` applied to its header JSON and the same data.
  static void edit_header(const fs::path& path, const std::function<void(json&)>& edit) {
    const std::string bytes = read_file(path);
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[i]);
    json header = json::parse(bytes.substr(8, length));
    edit(header);
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
    write_file(path, prefix + text + bytes.substr(8 + length));
  }

  // Writes job.toml and runs it.
  HostRun job(const std::string& toml) const { return {{"run", write("job.toml", toml).string()}}; }

 private:
  fs::path dir_;
};

// A job config running `mode` on dir/model (a relative path: the config's folder), with `body`
// after [job]; `extra` adds sections before [job].
std::string job_toml(const std::string& mode, const std::string& body,
                     const std::string& extra = "") {
  return "[model]\npath = \"model\"\n" + extra + "[job]\nmode = \"" + mode + "\"\n" + body;
}

std::string generate_toml(const std::string& prompts = "[[1, 2, 3]]", const std::string& extra = "",
                          int max_new_tokens = 2) {
  return job_toml("generate",
                  "[generate]\nprompts = " + prompts +
                      "\nmax_new_tokens = " + std::to_string(max_new_tokens) + "\n",
                  extra);
}

std::string forward_toml(const std::string& input_ids,
                         const std::string& output = "out.safetensors") {
  return job_toml("forward",
                  "[forward]\ninput_ids = " + input_ids + "\noutput = \"" + output + "\"\n");
}

// A copy of the tiny GPT-2 whose config.json names `architecture`, run by a generate job that
// searches `plugins` first.
HostRun fake_architecture(const Workspace& ws, const std::string& architecture,
                          const fs::path& plugins) {
  ws.copy_model();
  Workspace::edit_json(ws.model() / "config.json",
                       [&](json& c) { c["architectures"] = {architecture}; });
  HostRun run = ws.job(generate_toml());
  run.args.insert(run.args.end(), {"--plugin-dir", plugins.string()});
  return run;
}

HostRun edit_config_json(const Workspace& ws, const std::function<void(json&)>& edit) {
  ws.copy_model();
  Workspace::edit_json(ws.model() / "config.json", edit);
  return ws.job(generate_toml());
}

HostRun edit_header(const Workspace& ws, const std::function<void(json&)>& edit) {
  ws.copy_model();
  Workspace::edit_header(ws.model() / "model.safetensors", edit);
  return ws.job(generate_toml());
}

HostRun edit_index(const Workspace& ws, const std::function<void(json&)>& edit) {
  ws.copy_model("tiny-gpt2-sharded");
  Workspace::edit_json(ws.model() / "model.safetensors.index.json", edit);
  return ws.job(generate_toml());
}

HostRun truncate_weights(const Workspace& ws, uintmax_t size) {
  ws.copy_model();
  fs::resize_file(ws.model() / "model.safetensors", size);
  return ws.job(generate_toml());
}

HostRun unreadable(const fs::path& path, HostRun run) {
  fs::permissions(path, fs::perms::none);
  run.without_read_override = true;
  return run;
}

// One row of the table: how to break the input, and what the host must answer.
struct BadInput {
  std::string name;
  std::function<HostRun(const Workspace&)> prepare;
  int exit_status;
  // ECMAScript regex searched in stdout and stderr together; {dir} stands for the case's folder.
  std::string pattern;
  bool one_error_line = true;  // a single-rank job prints exactly one error line
};

void PrintTo(const BadInput& bad, std::ostream* out) { *out << bad.name; }

std::string regex_escape(const std::string& text) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(text, special, R"(\$&)");
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (!dir.empty() && ::access((fs::path(dir) / program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

struct Outcome {
  int status = -1;  // the exit status, or 128 + the signal
  std::string output;
};

// Runs `argv` with stdout and stderr captured together, killing its process group after
// kRunTimeout.
Outcome run_command(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  Outcome outcome;
  const auto deadline = std::chrono::steady_clock::now() + kRunTimeout;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (left.count() <= 0 || ::poll(&fd, 1, static_cast<int>(left.count())) == 0) {
      ::kill(-pid, SIGKILL);
      outcome.output += "\n[test: killed after " + std::to_string(kRunTimeout.count()) + " s]";
      break;
    }
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (got <= 0) break;
    outcome.output.append(buffer, static_cast<size_t>(got));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  outcome.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return outcome;
}

// Gives back the owner's permissions below `path` (a case may have taken them), so that the
// folder can be removed by a user without root's override.
void restore_permissions(const fs::path& path) {
  std::error_code error;
  if (fs::is_symlink(fs::symlink_status(path, error))) return;
  fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, error);
  if (!fs::is_directory(path, error)) return;
  for (const auto& entry : fs::directory_iterator(path, error)) restore_permissions(entry.path());
}

class BadInputTest : public ::testing::TestWithParam<BadInput> {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("shardformer_bad_input_" + std::to_string(::getpid()) + "_" + GetParam().name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    restore_permissions(dir_);
    fs::remove_all(dir_);
  }

  fs::path dir_;
};

TEST_P(BadInputTest, ExitsWithItsClassNamingTheCause) {
  const BadInput& bad = GetParam();
  const Workspace workspace(dir_);
  const HostRun run = bad.prepare(workspace);
  std::vector<std::string> argv{host_binary().string()};
  argv.insert(argv.end(), run.args.begin(), run.args.end());
  if (!run.env.empty()) {
    argv.insert(argv.begin(), run.env.begin(), run.env.end());
    argv.insert(argv.begin(), "env");
  }
  if (run.without_read_override && ::geteuid() == 0) {
    // Root reads any file; without these capabilities it obeys the permission bits.
    if (!on_path("setpriv")) GTEST_SKIP() << "running as root and setpriv is not installed";
    argv.insert(argv.begin(), {"setpriv", "--bounding-set", "-dac_override,-dac_read_search"});
  }
  const Outcome outcome = run_command(argv);
  const std::string pattern = replace_all(bad.pattern, "{dir}", regex_escape(dir_.string()));
  EXPECT_EQ(outcome.status, bad.exit_status) << outcome.output;
  EXPECT_TRUE(std::regex_search(outcome.output, std::regex(pattern)))
      << "/" << pattern << "/ not in:\n"
      << outcome.output;
  if (bad.one_error_line) {
    static const std::regex error_line(R"((^|\n)(\[[^\n]*\] \[error\] |error: ))");
    const auto lines = std::distance(
        std::sregex_iterator(outcome.output.begin(), outcome.output.end(), error_line),
        std::sregex_iterator());
    EXPECT_EQ(lines, 1) << outcome.output;
  }
}

// ---- The job config, and the paths it names ---------------------------------------------------

const BadInput kJobConfig[] = {
    {"ConfigNotReadable",
     [](const Workspace& ws) {
       ws.copy_model();
       return unreadable(ws.dir() / "job.toml", ws.job(generate_toml()));
     },
     3, "cannot open config file '{dir}/job\\.toml': it is not readable"},
    {"ConfigIsAFolder",
     [](const Workspace& ws) {
       return HostRun{{"run", ws.dir().string()}};
     },
     3, "cannot open config file '{dir}': it is a directory"},
    {"ConfigSyntaxError", [](const Workspace& ws) { return ws.job("[model]\npath = \n"); }, 3,
     "{dir}/job\\.toml:2:8: TOML syntax error"},
    {"ConfigWrongType",
     [](const Workspace& ws) {
       return ws.job(generate_toml("[[1]]", "[parallel]\ntp_size = \"two\"\n"));
     },
     3, "{dir}/job\\.toml:4:11: parallel\\.tp_size must be an integer, got string"},
    {"ConfigOutOfRange", [](const Workspace& ws) { return ws.job(generate_toml("[[1]]", "", 0)); },
     3, "{dir}/job\\.toml:7:18: generate\\.max_new_tokens must be in \\[1, 1000000\\], got 0"},
    {"ConfigMissingRequiredKey",
     [](const Workspace& ws) { return ws.job("[model]\npath = \"model\"\n"); }, 3,
     "{dir}/job\\.toml:1:1: missing required key job\\.mode"},
    {"ModelPathDoesNotExist", [](const Workspace& ws) { return ws.job(generate_toml()); }, 4,
     "{dir}/model: checkpoint folder does not exist"},
    {"ModelPathIsAFile",
     [](const Workspace& ws) {
       ws.write("model", "not a folder\n");
       return ws.job(generate_toml());
     },
     4, "{dir}/model: the checkpoint path is not a folder"},
    {"ModelFolderNotReadable",
     [](const Workspace& ws) {
       ws.copy_model();
       return unreadable(ws.model(), ws.job(generate_toml()));
     },
     4, "{dir}/model/config\\.json: cannot read the file: Permission denied"},
    {"OutputFolderDoesNotExist",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(forward_toml("[[1, 2]]", "absent/out.safetensors"));
     },
     3,
     "{dir}/job\\.toml: forward\\.output: cannot write '{dir}/absent/out\\.safetensors': the "
     "folder '{dir}/absent' does not exist"},
    {"OutputFolderNotWritable",
     [](const Workspace& ws) {
       ws.copy_model();
       fs::create_directory(ws.dir() / "out");
       const HostRun run = ws.job(forward_toml("[[1, 2]]", "out/logits.safetensors"));
       fs::permissions(ws.dir() / "out", fs::perms::owner_read | fs::perms::owner_exec);
       return HostRun{run.args, true};
     },
     3,
     "forward\\.output: cannot write '{dir}/out/logits\\.safetensors': the folder '{dir}/out' "
     "is not writable"},
    {"PluginPathDoesNotExist",
     [](const Workspace& ws) {
       ws.copy_model();
       Workspace::edit_json(ws.model() / "config.json",
                            [](json& c) { c["architectures"] = {"FakeModel"}; });
       return ws.job(generate_toml("[[1]]", "[plugins]\npaths = [\"absent-plugins\"]\n"));
     },
     5,
     "unknown architecture 'FakeModel': no plugin serves it\\. Known: .*\\. Plugin search path: "
     "{dir}/absent-plugins:"},
    {"SentencesFileDoesNotExist",
     [](const Workspace& ws) {
       return ws.job("[model]\npath = \"" + (models_dir() / "all-MiniLM-L6-v2").string() +
                     "\"\n[job]\nmode = \"embed\"\n[embed]\nsentences_file = \"absent.txt\"\n"
                     "output = \"out.safetensors\"\n");
     },
     3,
     "{dir}/job\\.toml: embed\\.sentences_file: cannot read '{dir}/absent\\.txt': No such file "
     "or directory"},
    {"TrainDataDoesNotExist",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(job_toml("train",
                              "[data]\npath = \"absent.jsonl\"\nseq_len = 8\n"
                              "[train]\nsteps = 1\nglobal_batch_size = 1\n"));
     },
     3, "{dir}/absent\\.jsonl: cannot read the file"},
    {"TensorParallelSizeDoesNotDivideHeads",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[[1]]", "[parallel]\ntp_size = 3\n"));
     },
     4,
     "job failed: rank [0-2]: plugin 'gpt2' could not build GPT2LMHeadModel: "
     "{dir}/model/config\\.json: n_head = 4 does not divide by the tensor-parallel size 3",
     false},
    {"UnknownOption",
     [](const Workspace& ws) {
       return HostRun{{"run", "--frobnicate", ws.dir().string()}};
     },
     2, "error: run: unrecognised option '--frobnicate'"},
    {"RepeatZero",
     [](const Workspace& ws) {
       ws.copy_model();
       HostRun run = ws.job(generate_toml());
       run.args.insert(run.args.end(), {"--repeat", "0"});
       return run;
     },
     2, "error: run: --repeat must be >= 1, got 0"},
};

INSTANTIATE_TEST_SUITE_P(JobConfig, BadInputTest, ::testing::ValuesIn(kJobConfig),
                         [](const auto& info) { return info.param.name; });

// ---- config.json --------------------------------------------------------------------------------

const BadInput kConfigJson[] = {
    {"ConfigJsonMissing",
     [](const Workspace& ws) {
       ws.copy_model();
       fs::remove(ws.model() / "config.json");
       return ws.job(generate_toml());
     },
     4, "{dir}/model/config\\.json: file not found"},
    {"ConfigJsonNotReadable",
     [](const Workspace& ws) {
       ws.copy_model();
       return unreadable(ws.model() / "config.json", ws.job(generate_toml()));
     },
     4, "{dir}/model/config\\.json: cannot read the file: Permission denied"},
    {"ConfigJsonInvalid",
     [](const Workspace& ws) {
       ws.copy_model();
       ws.write("model/config.json", "{\n  \"n_embd\": ,\n}\n");
       return ws.job(generate_toml());
     },
     4, "{dir}/model/config\\.json: invalid JSON at line 2, column 13"},
    {"ConfigJsonMissingKey",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c.erase("n_embd"); }); },
     4, "{dir}/model/config\\.json: missing key 'n_embd'"},
    {"ConfigJsonWrongType",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c["n_head"] = "4"; }); },
     4, "{dir}/model/config\\.json: key 'n_head' must be an integer, found a string \"4\""},
    {"ConfigJsonVocabularyContradictsTensors",
     [](const Workspace& ws) {
       return edit_config_json(ws, [](json& c) { c["vocab_size"] = 1000; });
     },
     4,
     "parameter 'transformer\\.wte\\.weight' has shape \\[1013, 64\\] in model\\.safetensors but "
     "config\\.json implies \\[1000, 64\\]"},
    {"ConfigJsonHiddenSizeContradictsTensors",
     [](const Workspace& ws) {
       return edit_config_json(ws, [](json& c) {
         c["n_embd"] = 32;
         c["n_head"] = 2;
       });
     },
     4,
     "parameter 'transformer\\.wte\\.weight' has shape \\[1013, 64\\] in model\\.safetensors but "
     "config\\.json implies \\[1013, 32\\]"},
    {"ConfigJsonPositionsContradictTensors",
     [](const Workspace& ws) {
       return edit_config_json(ws, [](json& c) { c["n_positions"] = 128; });
     },
     4,
     "parameter 'transformer\\.wpe\\.weight' has shape \\[64, 64\\] in model\\.safetensors but "
     "config\\.json implies \\[128, 64\\]"},
    {"ConfigJsonInnerSizeContradictsTensors",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c["n_inner"] = 100; }); },
     4,
     "parameter 'transformer\\.h\\.0\\.mlp\\.c_fc\\.weight' has shape \\[64, 256\\] in "
     "model\\.safetensors but config\\.json implies \\[64, 100\\]"},
    {"ConfigJsonMoreLayersThanTensors",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c["n_layer"] = 9; }); }, 4,
     "{dir}/model: no tensor named 'transformer\\.h\\.8\\.ln_1\\.weight' in the checkpoint; did "
     "you mean 'transformer\\.h\\.0\\.ln_1\\.weight'"},
    {"ConfigJsonFewerLayersThanTensors",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c["n_layer"] = 7; }); }, 4,
     "{dir}/model: 12 tensor\\(s\\) that no module of the model reads: "
     "'transformer\\.h\\.7\\.attn\\.c_attn\\.bias'"},
    {"ConfigJsonNoArchitectures",
     [](const Workspace& ws) {
       return edit_config_json(ws, [](json& c) { c.erase("architectures"); });
     },
     4, "{dir}/model/config\\.json: no \"architectures\" entry names the model class to build"},
    {"ConfigJsonUnknownArchitecture",
     [](const Workspace& ws) {
       return edit_config_json(ws, [](json& c) { c["architectures"] = {"FooForCausalLM"}; });
     },
     5, "unknown architecture 'FooForCausalLM': no plugin serves it\\. Known: .*GPT2LMHeadModel"},
    {"ConfigJsonUnknownKey",
     [](const Workspace& ws) { return edit_config_json(ws, [](json& c) { c["rope_flux"] = 3; }); },
     4,
     "{dir}/model: config\\.json has 1 key\\(s\\) that the model does not implement: 'rope_flux'"},
    {"ConfigJsonEosOutsideVocabulary",
     [](const Workspace& ws) {
       const HostRun run = edit_config_json(ws, [](json& c) { c["eos_token_id"] = 5000; });
       fs::remove(ws.model() / "generation_config.json");  // config.json's alone counts
       return run;
     },
     4,
     "{dir}/model/config\\.json: eos_token_id = 5000 is outside the model's vocabulary \\[0, "
     "1013\\)"},
    {"GenerationConfigEosOutsideVocabulary",
     [](const Workspace& ws) {
       const HostRun run = edit_config_json(ws, [](json&) {});
       std::ofstream(ws.model() / "generation_config.json") << R"({"eos_token_id": [1012, 5000]})";
       return run;
     },
     4,
     "{dir}/model/generation_config\\.json: eos_token_id = 5000 is outside the model's "
     "vocabulary \\[0, 1013\\)"},
    {"GenerationConfigUnsupportedKey",
     [](const Workspace& ws) {
       const HostRun run = edit_config_json(ws, [](json&) {});
       std::ofstream(ws.model() / "generation_config.json") << R"({"num_beams": 4})";
       return run;
     },
     4,
     "{dir}/model/generation_config\\.json: num_beams: is not supported by the host's generation"},
    {"ConfigJsonErrorOnTwoRanks",
     [](const Workspace& ws) {
       ws.copy_model();
       Workspace::edit_json(ws.model() / "config.json", [](json& c) { c.erase("n_embd"); });
       return ws.job(generate_toml("[[1]]", "[parallel]\ntp_size = 2\n"));
     },
     4, "job failed: rank [01]: .*{dir}/model/config\\.json: missing key 'n_embd'", false},
};

INSTANTIATE_TEST_SUITE_P(ConfigJson, BadInputTest, ::testing::ValuesIn(kConfigJson),
                         [](const auto& info) { return info.param.name; });

// ---- safetensors files and the shard index -----------------------------------------------------

const BadInput kSafetensors[] = {
    {"TruncatedInTheData", [](const Workspace& ws) { return truncate_weights(ws, 1000000); }, 4,
     "{dir}/model/model\\.safetensors: tensor '[a-z0-9_.]+': data_offsets \\[[0-9]+, [0-9]+\\] lie "
     "outside the data section of [0-9]+ bytes"},
    {"TruncatedInTheHeader", [](const Workspace& ws) { return truncate_weights(ws, 100); }, 4,
     "{dir}/model/model\\.safetensors: header length [0-9]+ exceeds the 92 bytes that follow the "
     "length in the file"},
    {"ShorterThanTheLength", [](const Workspace& ws) { return truncate_weights(ws, 4); }, 4,
     "{dir}/model/model\\.safetensors: the file is 4 bytes, shorter than the 8-byte header length"},
    {"OffsetsPastTheEnd",
     [](const Workspace& ws) {
       return edit_header(ws, [](json& h) {
         json& offsets = h["transformer.ln_f.weight"]["data_offsets"];
         offsets[1] = offsets[1].get<uint64_t>() + 4000000000u;
       });
     },
     4,
     "model\\.safetensors: tensor 'transformer\\.ln_f\\.weight': data_offsets \\[[0-9]+, "
     "[0-9]+\\] lie outside the data section of [0-9]+ bytes"},
    {"OverlappingTensors",
     [](const Workspace& ws) {
       return edit_header(ws, [](json& h) {
         h["transformer.ln_f.bias"]["data_offsets"] = h["transformer.ln_f.weight"]["data_offsets"];
       });
     },
     4,
     "model\\.safetensors: tensors 'transformer\\.ln_f\\.(bias|weight)' \\[[0-9]+, [0-9]+\\) and "
     "'transformer\\.ln_f\\.(bias|weight)' \\[[0-9]+, [0-9]+\\) overlap"},
    {"DtypeSizeDisagreesWithOffsets",
     [](const Workspace& ws) {
       return edit_header(ws, [](json& h) { h["transformer.wte.weight"]["dtype"] = "F16"; });
     },
     4,
     "model\\.safetensors: tensor 'transformer\\.wte\\.weight': shape \\[1013, 64\\] of dtype F16 "
     "needs 129664 bytes but data_offsets \\[[0-9]+, [0-9]+\\] span 259328 bytes"},
    {"UnknownDtype",
     [](const Workspace& ws) {
       return edit_header(ws, [](json& h) { h["transformer.wte.weight"]["dtype"] = "F99"; });
     },
     4, "model\\.safetensors: tensor 'transformer\\.wte\\.weight': unknown dtype 'F99'"},
    {"WeightsNotReadable",
     [](const Workspace& ws) {
       ws.copy_model();
       return unreadable(ws.model() / "model.safetensors", ws.job(generate_toml()));
     },
     4, "{dir}/model/model\\.safetensors: cannot open the file: Permission denied"},
    {"NoWeights",
     [](const Workspace& ws) {
       ws.copy_model();
       fs::remove(ws.model() / "model.safetensors");
       return ws.job(generate_toml());
     },
     4,
     "{dir}/model: no weights found: looked for model\\.safetensors and "
     "model\\.safetensors\\.index\\.json"},
    {"IndexOmitsATensor",
     [](const Workspace& ws) {
       return edit_index(ws, [](json& i) { i["weight_map"].erase("transformer.h.3.ln_1.weight"); });
     },
     4,
     "{dir}/model/model\\.safetensors\\.index\\.json: {dir}/model/"
     "model-[0-9]+-of-00034\\.safetensors holds tensor 'transformer\\.h\\.3\\.ln_1\\.weight', "
     "which the index's 'weight_map' does not list"},
    {"IndexNamesAMissingFile",
     [](const Workspace& ws) {
       ws.copy_model("tiny-gpt2-sharded");
       fs::remove(ws.model() / "model-00007-of-00034.safetensors");
       return ws.job(generate_toml());
     },
     4,
     "model\\.safetensors\\.index\\.json: shard {dir}/model/model-00007-of-00034\\.safetensors "
     "\\(holding 'transformer\\.h\\.1\\.attn\\.c_attn\\.bias' and 1 more tensors\\) does not "
     "exist"},
    {"IndexMapsATensorToTheWrongFile",
     [](const Workspace& ws) {
       return edit_index(ws, [](json& i) {
         i["weight_map"]["transformer.h.3.ln_1.weight"] = "model-00001-of-00034.safetensors";
       });
     },
     4,
     "model\\.safetensors\\.index\\.json: tensor 'transformer\\.h\\.3\\.ln_1\\.weight' is mapped "
     "to "
     "{dir}/model/model-00001-of-00034\\.safetensors but that file does not contain it"},
    {"IndexNamesAFileOutsideTheFolder",
     [](const Workspace& ws) {
       return edit_index(ws, [](json& i) {
         i["weight_map"]["transformer.h.3.ln_1.weight"] = "../model.safetensors";
       });
     },
     4,
     "model\\.safetensors\\.index\\.json: 'weight_map' entry 'transformer\\.h\\.3\\.ln_1\\.weight' "
     "must be a file name in the folder, found a string \"\\.\\./model\\.safetensors\""},
    {"IndexInvalid",
     [](const Workspace& ws) {
       ws.copy_model("tiny-gpt2-sharded");
       ws.write("model/model.safetensors.index.json", "{\"weight_map\": {\n");
       return ws.job(generate_toml());
     },
     4, "{dir}/model/model\\.safetensors\\.index\\.json: invalid JSON at line 2"},
    {"IndexNotReadable",
     [](const Workspace& ws) {
       ws.copy_model("tiny-gpt2-sharded");
       return unreadable(ws.model() / "model.safetensors.index.json", ws.job(generate_toml()));
     },
     4, "{dir}/model/model\\.safetensors\\.index\\.json: cannot read the file: Permission denied"},
};

INSTANTIATE_TEST_SUITE_P(Safetensors, BadInputTest, ::testing::ValuesIn(kSafetensors),
                         [](const auto& info) { return info.param.name; });

// ---- Plugins: every refusal reaches the user, naming the library ----------------------------

const BadInput kPlugins[] = {
    {"PluginWrongAbiMajor",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("wrong_major"));
     },
     5,
     "unknown architecture 'FakeModel': no plugin serves it\\..*Refused plugins: "
     ".*/libcase_wrong_major\\.so: incompatible SDK ABI: plugin built for 99\\.0"},
    {"PluginNewerAbiMinor",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("newer_minor"));
     },
     5,
     "Refused plugins: .*/libcase_newer_minor\\.so: plugin needs a newer SDK ABI: plugin built "
     "for [0-9]+\\.99"},
    {"PluginLibTorchMismatch",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("torch_mismatch"));
     },
     5,
     "Refused plugins: .*/libcase_torch_mismatch\\.so: LibTorch mismatch: plugin built with "
     "LibTorch 1\\.0\\.0"},
    {"PluginCxxAbiMismatch",
     [](const Workspace& ws) { return fake_architecture(ws, "FakeModel", plugin_case("cxx_abi")); },
     5,
     "Refused plugins: .*/libcase_cxx_abi\\.so: C\\+\\+ ABI mismatch: plugin built with "
     "_GLIBCXX_USE_CXX11_ABI=7"},
    {"PluginWithoutEntryPoint",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("no_entry"));
     },
     5,
     "Refused plugins: .*/libcase_no_entry\\.so: not a shardformer plugin: missing entry point "
     "'shardformer_plugin_descriptor'"},
    {"PluginWithoutDescriptor",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("null_descriptor"));
     },
     5, "Refused plugins: .*/libcase_null_descriptor\\.so: entry point returned no descriptor"},
    {"PluginNotALibrary",
     [](const Workspace& ws) { return fake_architecture(ws, "FakeModel", plugin_case("mixed")); },
     5,
     "Known: .*MixedModel.*Refused plugins: .*/libnot_a_library\\.so: not a loadable shared "
     "library"},
    {"PluginBuiltAgainstAnotherSdk",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FakeModel", plugin_case("missing_symbol"));
     },
     5,
     "Refused plugins: .*/libcase_missing_symbol\\.so: not a loadable shared library: undefined "
     "symbol shardformer::layers::function_this_sdk_lacks\\(int\\) .*rebuild it against this one"},
    {"PluginDuplicateArchitecture",
     [](const Workspace& ws) {
       return fake_architecture(ws, "DupModel", plugin_case("duplicate"));
     },
     4,
     "libcase_dup_2\\.so refused: duplicate architecture 'DupModel': already served by plugin "
     "'dup-first'[\\s\\S]*plugin 'dup-first' could not build DupModel: dup-first builds no models"},
    {"PluginFactoryFails",
     [](const Workspace& ws) {
       return fake_architecture(ws, "FailingModel", plugin_case("failing_factory"));
     },
     4, "plugin 'failing' could not build FailingModel: failing builds no models"},
};

INSTANTIATE_TEST_SUITE_P(Plugins, BadInputTest, ::testing::ValuesIn(kPlugins),
                         [](const auto& info) { return info.param.name; });

// ---- The job's input: token ids and lengths the model cannot take ---------------------------

const BadInput kRuntimeInput[] = {
    {"GenerateTokenOutsideVocabulary",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[[1, 5000, 3]]"));
     },
     3,
     "{dir}/job\\.toml: generate\\.prompts\\[0\\]\\[1\\] = 5000 is outside the model's vocabulary "
     "\\[0, 1013\\)"},
    {"ForwardTokenOutsideVocabulary",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(forward_toml("[[1, 2], [1013]]"));
     },
     3,
     "{dir}/job\\.toml: forward\\.input_ids\\[1\\]\\[0\\] = 1013 is outside the model's "
     "vocabulary \\[0, 1013\\)"},
    {"GenerateLongerThanPositions",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[[1], [1, 2, 3]]", "", 62));
     },
     3,
     "{dir}/job\\.toml: generate\\.max_new_tokens: generate\\.prompts\\[1\\] \\(3 tokens\\) \\+ "
     "max_new_tokens \\(62\\) = 65 exceeds the model's 64 positions"},
    {"ForwardLongerThanPositions",
     [](const Workspace& ws) {
       ws.copy_model();
       std::string ids = "[[1], [";
       for (int i = 0; i < 65; ++i) ids += (i > 0 ? ", " : "") + std::to_string(i);
       return ws.job(forward_toml(ids + "]]"));
     },
     3,
     "{dir}/job\\.toml: forward\\.input_ids\\[1\\] holds 65 tokens, more than the model's 64 "
     "positions"},
    {"GenerateEmptyPrompt",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[[1], []]"));
     },
     3, "{dir}/job\\.toml:6:17: generate\\.prompts\\[1\\] must not be empty"},
    {"GenerateNoPrompts",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[]"));
     },
     3, "{dir}/job\\.toml:6:11: generate\\.prompts must hold at least one sequence"},
    {"ForwardNegativeTokenId",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(forward_toml("[[1, -2]]"));
     },
     3, "{dir}/job\\.toml:6:18: forward\\.input_ids\\[0\\]\\[1\\] must be >= 0, got -2"},
    {"GenerateEosOutsideVocabulary",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml() + "eos_token_id = 5000\n");
     },
     3,
     "{dir}/job\\.toml: generate\\.eos_token_id = 5000 is outside the model's vocabulary \\[0, "
     "1013\\)"},
    {"TrainDataTokenOutsideVocabulary",
     [](const Workspace& ws) {
       ws.copy_model();
       ws.write("data.jsonl", "{\"input_ids\": [1, 2, 3]}\n{\"input_ids\": [4, 5000]}\n");
       return ws.job(job_toml("train",
                              "[data]\npath = \"data.jsonl\"\nseq_len = 8\n"
                              "[train]\nsteps = 1\nglobal_batch_size = 1\n"));
     },
     3,
     "{dir}/data\\.jsonl: token id 5000 at line 2 \\(\"input_ids\"\\) is outside the model's "
     "vocabulary \\[0, "
     "1013\\)"},
    {"CpuGemmChoiceUnknown",
     [](const Workspace& ws) {
       ws.copy_model();
       HostRun run = ws.job(forward_toml("[[1, 2]]"));
       run.env = {"SHARDFORMER_CPU_GEMM=fast"};
       return run;
     },
     3, "SHARDFORMER_CPU_GEMM is 'fast': use 'amx', 'openblas', 'onednn' or 'aten'"},
    {"SkinnyPrefetchChoiceUnknown",
     [](const Workspace& ws) {
       ws.copy_model();
       HostRun run = ws.job(forward_toml("[[1, 2]]"));
       run.env = {"SHARDFORMER_SKINNY_PREFETCH=sometimes"};
       return run;
     },
     3, "SHARDFORMER_SKINNY_PREFETCH is 'sometimes': use 'measure', 'on', 'off' or 'streams'"},
    {"PipelineTokenOutsideVocabulary",
     [](const Workspace& ws) {
       ws.copy_model();
       return ws.job(generate_toml("[[1, 5000]]", "[parallel]\npp_size = 2\n"));
     },
     3,
     "job failed: rank [01]: {dir}/job\\.toml: generate\\.prompts\\[0\\]\\[1\\] = 5000 is outside "
     "the model's vocabulary",
     false},
};

INSTANTIATE_TEST_SUITE_P(RuntimeInput, BadInputTest, ::testing::ValuesIn(kRuntimeInput),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace shardformer::testing

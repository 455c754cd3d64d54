// Plugin discovery against deliberately broken plugins: each way a plugin can be wrong gets
// its own clear refusal, and a refused plugin never stops the others from loading.
#include "plugin_registry.h"

#include "shardformer/error.h"
#include "shardformer/version.h"
#include "test_env.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include <filesystem>

namespace fs = std::filesystem;
using shardformer::host::PluginRegistry;

namespace {

fs::path case_dir(const std::string& name) {
  return shardformer::testing::binary_dir() / "tests/host/plugin_cases" / name;
}

// The one refusal recorded for a case folder holding a single bad library.
std::string only_failure(const std::string& name) {
  const auto registry = PluginRegistry::discover({case_dir(name)});
  EXPECT_TRUE(registry.plugins().empty());
  EXPECT_EQ(registry.failures().size(), 1u);
  if (registry.failures().empty()) return "";
  EXPECT_EQ(registry.failures()[0].file.parent_path(), case_dir(name));
  return registry.failures()[0].reason;
}

}  // namespace

TEST(PluginRegistry, LoadsAGoodPlugin) {
  const auto registry = PluginRegistry::discover({case_dir("good")});
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_TRUE(registry.failures().empty());
  const auto& p = registry.plugins()[0];
  EXPECT_EQ(p.name, "fake-a");
  EXPECT_EQ(p.version, "9.9.9");
  EXPECT_EQ(p.abi_major, static_cast<uint32_t>(SHARDFORMER_ABI_MAJOR));
  EXPECT_EQ(p.torch_version, TORCH_VERSION);
  EXPECT_EQ(p.architectures, std::vector<std::string>{"FakeAModel"});
  EXPECT_EQ(registry.find("FakeAModel").name, "fake-a");
}

TEST(PluginRegistry, RefusesWrongAbiMajorWithBothVersions) {
  const std::string reason = only_failure("wrong_major");
  EXPECT_NE(reason.find("incompatible SDK ABI"), std::string::npos) << reason;
  EXPECT_NE(reason.find("99.0"), std::string::npos) << reason;
  EXPECT_NE(reason.find(std::to_string(SHARDFORMER_ABI_MAJOR) + "." +
                        std::to_string(SHARDFORMER_ABI_MINOR)),
            std::string::npos)
      << reason;
}

TEST(PluginRegistry, RefusesNewerMinorWithBothVersions) {
  const std::string reason = only_failure("newer_minor");
  EXPECT_NE(reason.find("needs a newer SDK ABI"), std::string::npos) << reason;
  EXPECT_NE(reason.find("." + std::to_string(99)), std::string::npos) << reason;
}

TEST(PluginRegistry, RefusesLibTorchMismatchWithBothVersions) {
  const std::string reason = only_failure("torch_mismatch");
  EXPECT_NE(reason.find("LibTorch mismatch"), std::string::npos) << reason;
  EXPECT_NE(reason.find("1.0.0"), std::string::npos) << reason;
  EXPECT_NE(reason.find(TORCH_VERSION), std::string::npos) << reason;
}

TEST(PluginRegistry, RefusesCxxAbiMismatch) {
  const std::string reason = only_failure("cxx_abi");
  EXPECT_NE(reason.find("C++ ABI mismatch"), std::string::npos) << reason;
}

TEST(PluginRegistry, RefusesMissingEntryPoint) {
  const std::string reason = only_failure("no_entry");
  EXPECT_NE(reason.find("missing entry point 'shardformer_plugin_descriptor'"), std::string::npos)
      << reason;
}

TEST(PluginRegistry, RefusesEntryPointWithoutDescriptor) {
  const std::string reason = only_failure("null_descriptor");
  EXPECT_NE(reason.find("returned no descriptor"), std::string::npos) << reason;
}

TEST(PluginRegistry, RefusesDuplicateArchitectureKeepingTheFirst) {
  const auto registry = PluginRegistry::discover({case_dir("duplicate")});
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0].name, "dup-first");
  ASSERT_EQ(registry.failures().size(), 1u);
  const std::string& reason = registry.failures()[0].reason;
  EXPECT_NE(reason.find("duplicate architecture 'DupModel'"), std::string::npos) << reason;
  EXPECT_NE(reason.find("dup-first"), std::string::npos) << reason;
  EXPECT_EQ(registry.find("DupModel").name, "dup-first");
}

TEST(PluginRegistry, NotALibraryDoesNotStopTheOthers) {
  const auto registry = PluginRegistry::discover({case_dir("mixed")});
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0].name, "mixed-good");
  ASSERT_EQ(registry.failures().size(), 1u);
  EXPECT_EQ(registry.failures()[0].file.filename(), "libnot_a_library.so");
  EXPECT_NE(registry.failures()[0].reason.find("not a loadable shared library"), std::string::npos);
}

// dlopen's own reason, not Boost.DLL's "bad file descriptor": the missing symbol, demangled, and
// what to do about it.
TEST(PluginRegistry, AnUndefinedSymbolIsNamedAndExplained) {
  const auto registry = PluginRegistry::discover({case_dir("missing_symbol")});
  EXPECT_TRUE(registry.plugins().empty());
  ASSERT_EQ(registry.failures().size(), 1u);
  const std::string& reason = registry.failures()[0].reason;
  EXPECT_NE(reason.find("undefined symbol shardformer::layers::function_this_sdk_lacks(int)"),
            std::string::npos)
      << reason;
  EXPECT_NE(reason.find("another shardformer SDK or LibTorch"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("Bad file descriptor"), std::string::npos) << reason;
}

TEST(PluginRegistry, AllCasesTogetherLoadOnlyTheGoodOnes) {
  std::vector<fs::path> path;
  for (const char* name : {"good", "wrong_major", "newer_minor", "torch_mismatch", "cxx_abi",
                           "no_entry", "null_descriptor", "duplicate", "mixed", "missing_symbol"}) {
    path.push_back(case_dir(name));
  }
  const auto registry = PluginRegistry::discover(path);
  std::vector<std::string> names;
  for (const auto& p : registry.plugins()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fake-a", "dup-first", "mixed-good"}));
  EXPECT_EQ(registry.failures().size(), 9u);
}

TEST(PluginRegistry, UnknownArchitectureListsTheKnownOnes) {
  const auto registry = PluginRegistry::discover({case_dir("good"), case_dir("mixed")});
  try {
    registry.find("LlamaForCausalLM");
    FAIL() << "expected PluginError";
  } catch (const shardformer::PluginError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown architecture 'LlamaForCausalLM'"), std::string::npos);
    EXPECT_NE(message.find("FakeAModel, MixedModel"), std::string::npos) << message;
  }
}

TEST(PluginRegistry, FactoryErrorsReachTheCallerAsModelError) {
  const auto registry = PluginRegistry::discover({case_dir("failing_factory")});
  shardformer::ModelArgs args;
  args.architecture = "FailingModel";
  try {
    registry.create_model(args);
    FAIL() << "expected ModelError";
  } catch (const shardformer::ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("plugin 'failing' could not build FailingModel: failing "
                                         "builds no models"),
              std::string::npos)
        << e.what();
  }
}

TEST(PluginRegistry, AFolderNamedTwiceIsSearchedOnce) {
  // The config's folder is often also a default one (the host's own plugins folder).
  const auto registry = PluginRegistry::discover(
      {case_dir("good"), case_dir("good") / ".." / "good", case_dir("good")});
  EXPECT_EQ(registry.plugins().size(), 1u);
  EXPECT_TRUE(registry.failures().empty());
}

TEST(PluginRegistry, MissingFoldersAreSkipped) {
  const auto registry = PluginRegistry::discover({"/nonexistent/plugins", case_dir("good")});
  EXPECT_EQ(registry.plugins().size(), 1u);
  EXPECT_TRUE(registry.failures().empty());
}

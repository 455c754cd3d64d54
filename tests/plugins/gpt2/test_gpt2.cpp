// GPT-2 at one rank against HF transformers: logits and hidden states of a padded batch,
// losses and gradients, greedy generations with a KV cache, for the tiny checkpoint and its
// variants (untied head, every activation, attention options, dtypes); HF parameter names,
// sharded checkpoints; checkpoints that are refused or accepted with a clear message; dropout
// in training; and the host's `run` output.
#include "gpt2_fixture.h"

#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/error.h"
#include "shardformer/generation.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/runtime/inference_scope.h"
#include "shardformer/strings.h"
#include "test_env.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

namespace fs = std::filesystem;
using namespace shardformer;
using shardformer::testing::Gpt2Fixture;
using shardformer::testing::kOutputAtol;

namespace {

// The fixture is loaded once; a failed load fails every test (GoogleTest would otherwise
// report them skipped).
class GPT2Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      fixture_ = std::make_unique<Gpt2Fixture>();
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() { fixture_.reset(); }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::shared_ptr<Model> build(const std::string& architecture,
                                      SessionOptions options = {}) {
    return fixture_->build(architecture, nullptr, std::move(options));
  }
  static std::shared_ptr<Model> build_from(const fs::path& checkpoint) {
    return build("GPT2LMHeadModel", SessionOptions{.checkpoint = checkpoint});
  }
  static at::Tensor ref(const std::string& name) { return fixture_->ref(name); }
  static int64_t ref_scalar(const std::string& name) { return fixture_->ref_scalar(name); }
  static std::vector<std::vector<int64_t>> prompts() { return fixture_->prompts(); }
  static GenerationConfig generation_config(bool with_eos) {
    return fixture_->generation_config(with_eos);
  }
  static at::Tensor forward(Model& model) { return fixture_->forward(model); }
  static void expect_close(const at::Tensor& actual, const at::Tensor& expected, double atol) {
    shardformer::testing::expect_close(actual, expected, atol, 0.0, "output");
  }

  static inline std::unique_ptr<Gpt2Fixture> fixture_;
  static inline std::string setup_error_;
};

// Copies the tiny checkpoint into a fresh folder, for tests that change it.
fs::path copy_checkpoint(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("shardformer_gpt2_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry :
       fs::directory_iterator(shardformer::testing::models_dir() / "tiny-gpt2")) {
    fs::copy(entry.path(), dir / entry.path().filename());
  }
  return dir;
}

void replace_in_file(const fs::path& file, const std::string& from, const std::string& to) {
  std::ifstream in(file);
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  const size_t at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << file;
  text.replace(at, from.size(), to);
  std::ofstream(file) << text;
}

// Rewrites the copy's weights with `change` applied to its tensors.
void edit_tensors(const fs::path& dir,
                  const std::function<void(std::map<std::string, at::Tensor>&)>& change) {
  std::map<std::string, at::Tensor> tensors;
  {
    const SafetensorsFile file(dir / "model.safetensors");
    for (const auto& info : file.tensors()) tensors[info.name] = file.read(info.name);
  }
  change(tensors);
  save_safetensors(dir / "model.safetensors", tensors);
}

// Runs `action`, expecting an exception of type E whose message holds every part.
template <typename E>
void expect_error(const std::function<void()>& action, const std::vector<std::string>& parts) {
  try {
    action();
    ADD_FAILURE() << "no error was thrown";
  } catch (const E& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "message lacks \"" << part << "\": " << e.what();
    }
  }
}

}  // namespace

TEST_F(GPT2Test, LogitsMatchHF) {
  const auto model = build("GPT2LMHeadModel");
  EXPECT_EQ(model->output_name(), "logits");
  expect_close(forward(*model), ref("forward_logits"), 1e-5);
}

// As a host job runs it (an inference scope: the fused kernels, and products on weights packed
// once where the CPU's library packs them): the first pass's products read the weights as they
// are, the second's the packed copies (AMX tiles' parts, MKL's or oneDNN's layouts).
TEST_F(GPT2Test, InferencePassesOnPackedWeightsMatchHF) {
  const auto model = build("GPT2LMHeadModel");
  ForwardInputs inputs;
  inputs.input_ids = ref("forward_long_input_ids");  // [3, 24]: 72 rows a product
  const runtime::InferenceScope inference;
  const at::NoGradGuard no_grad;
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "first pass" : "second pass");
    expect_close(model->forward(inputs), ref("forward_long_logits"), 1e-5);
  }
}

TEST_F(GPT2Test, BaseModelHiddenStatesMatchHF) {
  const auto model = build("GPT2Model");
  EXPECT_EQ(model->output_name(), "last_hidden_state");
  expect_close(forward(*model), ref("forward_last_hidden_state"), 1e-5);
}

TEST_F(GPT2Test, ShardedCheckpointGivesTheSameLogits) {
  const fs::path sharded = shardformer::testing::models_dir() / "tiny-gpt2-sharded";
  EXPECT_GT(Checkpoint(sharded).files().size(), 1u);
  expect_close(forward(*build_from(sharded)), ref("forward_logits"), 1e-5);
}

TEST_F(GPT2Test, ParameterNamesAreHFNames) {
  // HF saves the tied lm_head.weight once, as transformer.wte.weight: the checkpoint's names
  // are exactly the model's parameters.
  const auto model = build("GPT2LMHeadModel");
  std::set<std::string> ours;
  for (const auto& item : model->named_parameters()) ours.insert(item.key());
  const auto names = fixture_->checkpoint.tensor_names();
  EXPECT_EQ(ours, std::set<std::string>(names.begin(), names.end()));
}

TEST_F(GPT2Test, GreedyGenerationMatchesHF) {
  const auto model = build("GPT2LMHeadModel");
  const GenerationResult result =
      generate(*model, prompts(), generation_config(/*with_eos=*/false));
  EXPECT_TRUE(at::equal(result.sequences, ref("generate_sequences")))
      << "ours:\n"
      << result.sequences << "\nHF:\n"
      << ref("generate_sequences");
}

TEST_F(GPT2Test, GreedyGenerationStopsAtEosLikeHF) {
  const auto model = build("GPT2LMHeadModel");
  const GenerationResult result = generate(*model, prompts(), generation_config(/*with_eos=*/true));
  EXPECT_TRUE(at::equal(result.sequences, ref("generate_eos_sequences")))
      << "ours:\n"
      << result.sequences << "\nHF:\n"
      << ref("generate_eos_sequences");
  ASSERT_FALSE(result.new_tokens[0].empty());
  EXPECT_EQ(result.new_tokens[0].back(), ref_scalar("generate_eos_token_id"));
}

// Prompts of one length: the forward passes get no mask (read as every token seen, so a
// decoding step's attention has none to convert in every layer), and the tokens equal HF's.
TEST_F(GPT2Test, GreedyGenerationOfUnpaddedPromptsPassesNoMaskAndMatchesHF) {
  const auto model = build("GPT2LMHeadModel");
  const at::Tensor ids = ref("generate_unpadded_input_ids");  // [2, 5]
  std::vector<std::vector<int64_t>> rows;
  for (int64_t row = 0; row < ids.size(0); ++row) {
    const at::Tensor r = ids[row].contiguous();
    rows.emplace_back(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
  }
  int64_t steps = 0, masked = 0;
  const DecodeStep step{.logits =
                            [&](const ForwardInputs& inputs) {
                              ++steps;
                              masked += inputs.attention_mask.defined() ? 1 : 0;
                              return model->forward(inputs).select(1, -1);
                            },
                        .share = [](at::Tensor&) {}};
  const GenerationResult result =
      generate(*model, rows, generation_config(/*with_eos=*/false), step);
  EXPECT_EQ(steps, ref_scalar("generate_max_new_tokens"));
  EXPECT_EQ(masked, 0);
  EXPECT_TRUE(at::equal(result.sequences, ref("generate_unpadded_sequences")))
      << "ours:\n"
      << result.sequences << "\nHF:\n"
      << ref("generate_unpadded_sequences");
}

TEST_F(GPT2Test, GenerationRefusesTooLongRequests) {
  const auto model = build("GPT2LMHeadModel");
  GenerationConfig config;
  config.max_new_tokens = 64;  // + a 5-token prompt > n_positions = 64
  EXPECT_THROW(generate(*model, prompts(), config), Error);
}

TEST_F(GPT2Test, HeadsNotDividingHiddenSizeIsAClearError) {
  const fs::path dir = copy_checkpoint("bad_heads");
  replace_in_file(dir / "config.json", "\"n_head\": 4", "\"n_head\": 5");
  try {
    build_from(dir);
    FAIL() << "expected ModelError";
  } catch (const ModelError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
    EXPECT_NE(message.find("n_embd (64) is not divisible by n_head (5)"), std::string::npos)
        << message;
  }
}

TEST_F(GPT2Test, ShapeMismatchNamesTheParameterAndBothShapes) {
  const fs::path dir = copy_checkpoint("bad_shape");
  replace_in_file(dir / "config.json", "\"n_positions\": 64", "\"n_positions\": 32");
  try {
    build_from(dir);
    FAIL() << "expected CheckpointError";
  } catch (const ModelError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("transformer.wpe.weight"), std::string::npos) << message;
    EXPECT_NE(message.find("[64, 64]"), std::string::npos) << message;
    EXPECT_NE(message.find("[32, 64]"), std::string::npos) << message;
  }
}

TEST_F(GPT2Test, MissingTensorIsNamed) {
  const fs::path dir = copy_checkpoint("missing_tensor");
  edit_tensors(dir, [](auto& tensors) { tensors.erase("transformer.h.1.mlp.c_fc.bias"); });
  try {
    build_from(dir);
    FAIL() << "expected an error";
  } catch (const ModelError& e) {
    EXPECT_NE(std::string(e.what()).find("transformer.h.1.mlp.c_fc.bias"), std::string::npos)
        << e.what();
  }
}

// ---- checkpoints: every tensor and config key used, or the job stops naming it ------------

TEST_F(GPT2Test, AnExtraTensorIsRefusedByNameUnlessTheJobAllowsIt) {
  const fs::path dir = copy_checkpoint("extra_tensor");
  edit_tensors(dir, [](auto& tensors) {
    tensors["transformer.h.0.attn.rotary.inv_freq"] = at::ones({8});
    tensors["score.weight"] = at::ones({2, 64});
  });
  expect_error<CheckpointError>([&] { build_from(dir); },
                                {"2 tensor(s) that no module of the model reads", "'score.weight'",
                                 "'transformer.h.0.attn.rotary.inv_freq'", "unused_tensors"});
  const auto model =
      build("GPT2LMHeadModel", {.checkpoint = dir, .usage = {.tensors = UnusedAction::kWarn}});
  expect_close(forward(*model), ref("forward_logits"), kOutputAtol);
}

TEST_F(GPT2Test, AnUnknownConfigKeyIsRefusedByNameUnlessTheJobAllowsIt) {
  const fs::path dir = copy_checkpoint("unknown_key");
  replace_in_file(dir / "config.json", "\"n_head\": 4", "\"n_head\": 4, \"rotary_dim\": 16");
  expect_error<CheckpointError>([&] { build_from(dir); },
                                {"config.json has 1 key(s) that the model does not implement",
                                 "'rotary_dim'", "unused_config_keys"});
  const auto model =
      build("GPT2LMHeadModel", {.checkpoint = dir, .usage = {.config_keys = UnusedAction::kWarn}});
  expect_close(forward(*model), ref("forward_logits"), kOutputAtol);
}

TEST_F(GPT2Test, SwitchesAtTheirDefaultsAreAcceptedAndSetOnesRefused) {
  const fs::path dir = copy_checkpoint("switches");
  replace_in_file(dir / "config.json", "\"n_head\": 4",
                  "\"n_head\": 4, \"is_decoder\": false, \"pruned_heads\": {}");
  expect_close(forward(*build_from(dir)), ref("forward_logits"), kOutputAtol);
  replace_in_file(dir / "config.json", "\"pruned_heads\": {}", "\"pruned_heads\": {\"0\": [1]}");
  expect_error<CheckpointError>([&] { build_from(dir); }, {"'pruned_heads'"});
}

TEST_F(GPT2Test, LegacyMaskBuffersAndATiedHeadCopyAreKnownAndUnused) {
  // Old GPT-2 checkpoints store the causal mask per layer and the tied head a second time.
  const fs::path dir = copy_checkpoint("legacy");
  edit_tensors(dir, [](auto& tensors) {
    for (int layer = 0; layer < 8; ++layer) {
      const std::string attn = "transformer.h." + std::to_string(layer) + ".attn.";
      tensors[attn + "bias"] = at::ones({64, 64}, at::kBool).tril().view({1, 1, 64, 64});
      tensors[attn + "masked_bias"] = at::full({}, -1e4);
    }
    tensors["lm_head.weight"] = tensors.at("transformer.wte.weight").clone();
  });
  expect_close(forward(*build_from(dir)), ref("forward_logits"), kOutputAtol);
}

TEST_F(GPT2Test, AddCrossAttentionIsRefused) {
  const fs::path dir = copy_checkpoint("cross_attention");
  replace_in_file(dir / "config.json", "\"add_cross_attention\": false",
                  "\"add_cross_attention\": true");
  expect_error<ModelError>([&] { build_from(dir); },
                           {"config.json", "add_cross_attention = true", "not supported"});
}

TEST_F(GPT2Test, DropoutProbabilitiesOutsideZeroToOneAreRefusedNamingTheKey) {
  const fs::path dir = copy_checkpoint("bad_dropout");
  replace_in_file(dir / "config.json", "\"attn_pdrop\": 0.1", "\"attn_pdrop\": 1.0");
  expect_error<ModelError>([&] { build_from(dir); },
                           {"config.json", "'attn_pdrop' = 1 is not a probability in [0, 1)"});
}

// ---- dtypes ---------------------------------------------------------------------------------

// The same checkpoint in other job dtypes against HF run in that dtype (measured: equal). The
// bound is one unit in the last place of the largest logit (|logit| < 8): 2^-8 in fp16, 2^-5
// in bf16.
TEST_F(GPT2Test, Float64Float16AndBfloat16JobsMatchHFInTheSameDtype) {
  const struct {
    c10::ScalarType dtype;
    std::string name;
    double atol;
  } cases[] = {{at::kDouble, "float64", 1e-12},
               {at::kHalf, "float16", 0.00390625},
               {at::kBFloat16, "bfloat16", 0.03125}};
  for (const auto& c : cases) {
    const auto model = build("GPT2LMHeadModel", {.dtype = c.dtype});
    const at::Tensor logits = forward(*model);
    EXPECT_EQ(logits.scalar_type(), c.dtype) << c.name;
    const at::Tensor expected = ref("forward_logits_" + c.name);
    const double worst =
        (logits.to(at::kDouble) - expected.to(at::kDouble)).abs().max().item<double>();
    EXPECT_LE(worst, c.atol) << c.name << " (max |logit| " << expected.abs().max().item<double>()
                             << ")";
    std::cout << c.name << ": max |ours - HF| = " << worst << "\n";
  }
}

// ---- variants: untied head, activations, attention options ----------------------------------

class GPT2Variant : public ::testing::TestWithParam<std::string> {};

TEST_P(GPT2Variant, LogitsLossGradientsAndGenerationMatchHF) {
  const Gpt2Fixture f("tiny-gpt2-" + GetParam());
  const auto model = f.build("GPT2LMHeadModel");
  shardformer::testing::expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0,
                                     "logits");
  shardformer::testing::expect_loss_and_grads_match(f, *model, nullptr);
  const GenerationResult result = generate(*model, f.prompts(), f.generation_config(true));
  EXPECT_TRUE(at::equal(result.sequences, f.ref("generate_eos_sequences"))) << result.sequences;
  const auto base = f.build("GPT2Model");
  shardformer::testing::expect_close(f.forward(*base), f.ref("forward_last_hidden_state"),
                                     kOutputAtol, 0.0, "hidden states");
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, GPT2Variant,
                         ::testing::Values("untied", "gelu", "relu", "silu", "tanh",
                                           "gelu_pytorch_tanh", "quick_gelu"));

TEST(GPT2Untied, TheHeadIsItsOwnParameterAndDiffersFromTheEmbedding) {
  const Gpt2Fixture f("tiny-gpt2-untied");
  const auto model = f.build("GPT2LMHeadModel");
  const auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("lm_head.weight"));
  EXPECT_FALSE(at::equal(params["lm_head.weight"], params["transformer.wte.weight"]));
  EXPECT_EQ(f.grad_names().size(), params.size());
}

// ---- dropout in training ----------------------------------------------------------------------

TEST(GPT2Dropout, WithEveryProbabilityZeroTrainingEqualsHF) {
  const Gpt2Fixture f("tiny-gpt2-gelu");  // resid, embd and attn_pdrop = 0
  const auto model = f.build("GPT2LMHeadModel");
  model->train();
  shardformer::testing::expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0,
                                     "logits in training mode");
  shardformer::testing::expect_loss_and_grads_match(f, *model, nullptr);
}

TEST(GPT2Dropout, TrainingDropsAndSavedRngStatesReplayTheSameStep) {
  const Gpt2Fixture f;
  const auto model = f.build("GPT2LMHeadModel");
  model->train();
  const auto saved = layers::dropout_rng_states(*model);
  EXPECT_EQ(saved.size(), 8u * 3u + 1u);  // per block attn, resid and mlp; the embeddings
  const at::Tensor first = f.forward(*model);
  EXPECT_FALSE(at::allclose(first, f.ref("forward_logits"), 1e-3, 1e-3)) << "no dropout";
  EXPECT_FALSE(at::equal(first, f.forward(*model))) << "the streams did not advance";
  layers::set_dropout_rng_states(*model, saved);
  EXPECT_TRUE(at::equal(first, f.forward(*model))) << "restored streams drew other masks";
}

// The nodes of `root`'s autograd graph whose name holds `name`.
int count_graph_nodes(const at::Tensor& root, const std::string& name) {
  std::vector<torch::autograd::Node*> todo{root.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int count = 0;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    count += node->name().find(name) != std::string::npos ? 1 : 0;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return count;
}

// Activation checkpointing with dropout on: the recomputed blocks (every one, half, none) keep
// no graph of their own, and their replay in backward draws the masks forward drew, so the loss
// and every gradient equal the step without recomputation's.
TEST(GPT2Dropout, RecomputedBlocksReplayTheirMasks) {
  const Gpt2Fixture f;  // resid, embd and attn_pdrop = 0.1
  const auto model = f.build("GPT2LMHeadModel");
  model->train();
  const auto saved = layers::dropout_rng_states(*model);
  const auto step = [&](double ratio, int expected_recomputed) {
    layers::set_dropout_rng_states(*model, saved);
    model->set_recompute({.ratio = ratio});
    for (auto& p : model->parameters()) p.mutable_grad() = at::Tensor();
    const at::Tensor loss = model->loss(f.forward_inputs(), f.ref("train_labels"));
    EXPECT_EQ(count_graph_nodes(loss, "RecomputeFunction"), expected_recomputed) << ratio;
    loss.backward();
    auto grads = gather_parameters(*model, nullptr, /*grads=*/true);
    grads.emplace("loss", loss.detach().reshape({1}));
    return grads;
  };
  const auto plain = step(0.0, 0);
  for (const auto& [ratio, blocks] : {std::pair{1.0, 8}, std::pair{0.5, 4}}) {
    const auto recomputed = step(ratio, blocks);
    ASSERT_EQ(recomputed.size(), plain.size());
    for (const auto& [name, grad] : plain) {
      shardformer::testing::expect_close(recomputed.at(name), grad, 1e-7, 1e-6,
                                         str(name, " at ratio ", ratio));
    }
  }
  model->eval();  // nothing recomputes outside training
  const at::Tensor loss = model->loss(f.forward_inputs(), f.ref("train_labels"));
  EXPECT_EQ(count_graph_nodes(loss, "RecomputeFunction"), 0);
  EXPECT_THROW(model->set_recompute({.layers_per_stage = {9}}), ConfigError);     // 8 layers
  EXPECT_THROW(model->set_recompute({.layers_per_stage = {1, 1}}), ConfigError);  // 1 stage
}

TEST(GPT2Dropout, AttentionDropoutAloneChangesTheOutput) {
  const fs::path dir = copy_checkpoint("attn_dropout_only");
  replace_in_file(dir / "config.json", "\"embd_pdrop\": 0.1", "\"embd_pdrop\": 0.0");
  replace_in_file(dir / "config.json", "\"resid_pdrop\": 0.1", "\"resid_pdrop\": 0.0");
  const Gpt2Fixture f;
  const auto model = f.build("GPT2LMHeadModel", nullptr, {.checkpoint = dir});
  model->train();
  EXPECT_FALSE(at::allclose(f.forward(*model), f.ref("forward_logits"), 1e-3, 1e-3))
      << "attn_pdrop = 0.1 dropped nothing";
  model->eval();
  shardformer::testing::expect_close(f.forward(*model), f.ref("forward_logits"), kOutputAtol, 0.0,
                                     "eval logits");
}

// `shardformer-host run` (the host starts the ranks) at several layouts: the generate job
// prints HF's tokens and the forward job writes HF's logits.
struct HostLayout {
  std::string name;
  std::string parallel_toml;  // the [parallel] keys, and any later sections
};

void PrintTo(const HostLayout& layout, std::ostream* os) { *os << layout.name; }

class GPT2HostRun : public GPT2Test, public ::testing::WithParamInterface<HostLayout> {
 protected:
  // Runs the host on a job config of `job_toml` and the layout; returns its stdout.
  // A forward job with a loss: the logits file and the loss equal HF's.
  void check_forward_job();
  std::string run_host(const std::string& job_toml) {
    const fs::path dir = fs::path(::testing::TempDir()) / ("shardformer_gpt2_" + GetParam().name);
    fs::create_directories(dir);
    std::ofstream(dir / "job.toml")
        << "[model]\npath = \"" << (shardformer::testing::models_dir() / "tiny-gpt2").string()
        << "\"\n"
        << job_toml << "[parallel]\n"
        << GetParam().parallel_toml << "\n";
    const std::string command = shardformer::testing::host_binary().string() + " run " +
                                (dir / "job.toml").string() + " --plugin-dir " +
                                shardformer::testing::plugin_dir().string() + " 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    EXPECT_NE(pipe, nullptr);
    std::string output;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
    EXPECT_EQ(pclose(pipe), 0) << output;
    return output;
  }
  static std::string token_lists(const at::Tensor& ids, const at::Tensor& mask) {
    std::ostringstream out;
    out << "[";
    for (int64_t row = 0; row < ids.size(0); ++row) {
      out << (row ? ", [" : "[");
      bool first = true;
      for (int64_t col = 0; col < ids.size(1); ++col) {
        if (mask[row][col].item<int64_t>() == 0) continue;
        out << (first ? "" : ", ") << ids[row][col].item<int64_t>();
        first = false;
      }
      out << "]";
    }
    out << "]";
    return out.str();
  }
};

TEST_P(GPT2HostRun, GeneratePrintsHFGreedyTokens) {
  std::ostringstream job;
  job << "[job]\nmode = \"generate\"\n[generate]\nprompts = "
      << token_lists(ref("generate_input_ids"), ref("generate_attention_mask"))
      << "\nmax_new_tokens = " << ref_scalar("generate_max_new_tokens")
      << "\neos_token_id = " << ref_scalar("generate_eos_token_id")
      << "\npad_token_id = " << ref_scalar("generate_pad_token_id") << "\n";
  const std::string output = run_host(job.str());

  // Expected lines: HF's new tokens per row, up to and including the eos.
  const at::Tensor sequences = ref("generate_eos_sequences");
  const int64_t prompt_len = ref("generate_input_ids").size(1);
  const int64_t eos = ref_scalar("generate_eos_token_id");
  std::ostringstream expected;
  for (int64_t row = 0; row < sequences.size(0); ++row) {
    expected << "generated[" << row << "]:";
    for (int64_t col = prompt_len; col < sequences.size(1); ++col) {
      const int64_t id = sequences[row][col].item<int64_t>();
      expected << " " << id;
      if (id == eos) break;
    }
    expected << "\n";
  }
  EXPECT_EQ(output, expected.str());
}

void GPT2HostRun::check_forward_job() {
  const fs::path written =
      fs::path(::testing::TempDir()) / ("shardformer_gpt2_" + GetParam().name + "_logits.st");
  fs::remove(written);
  std::ostringstream job;
  job << "[job]\nmode = \"forward\"\n[forward]\nloss = true\ninput_ids = "
      << token_lists(ref("forward_input_ids"), ref("forward_attention_mask")) << "\noutput = \""
      << written.string() << "\"\n";
  const std::string output = run_host(job.str());
  EXPECT_NE(output.find("forward: logits [4, 7, 1013] written to"), std::string::npos) << output;
  EXPECT_NE(output.find("forward: loss "), std::string::npos) << output;
  ASSERT_TRUE(fs::exists(written)) << output;
  const SafetensorsFile file(written);
  shardformer::testing::expect_close(file.read("logits"), ref("forward_logits"), kOutputAtol, 0.0,
                                     "logits");
  shardformer::testing::expect_close(file.read("loss"), ref("train_loss"), kOutputAtol, 0.0,
                                     "loss");
}

TEST_P(GPT2HostRun, ForwardWritesHFLogitsAndLoss) { check_forward_job(); }

// Forward jobs only (generation refuses sequence parallelism): split_gather at tp = 2, whose 4 x
// 7 tokens (padded to 8) take the inference collectives through shared memory, the logits
// written by rank 0 from its output arena.
class GPT2HostForwardRun : public GPT2HostRun {};

TEST_P(GPT2HostForwardRun, ForwardWritesHFLogitsAndLoss) { check_forward_job(); }

INSTANTIATE_TEST_SUITE_P(SequenceParallel, GPT2HostForwardRun,
                         ::testing::Values(HostLayout{"tp2_split_gather",
                                                      "tp_size = 2\n[shard]\n"
                                                      "enable_sequence_parallelism = true"}),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    Layouts, GPT2HostRun,
    ::testing::Values(HostLayout{"tp1", "tp_size = 1"}, HostLayout{"tp2", "tp_size = 2"},
                      HostLayout{"pp2", "pp_size = 2"},
                      HostLayout{"pp2_gpipe_layers5and3",
                                 "pp_size = 2\n[pipeline]\nschedule = \"gpipe\"\n"
                                 "layers_per_stage = [5, 3]"},
                      HostLayout{"pp2_tp2_interleaved",
                                 "pp_size = 2\ntp_size = 2\n[pipeline]\n"
                                 "schedule = \"interleaved\"\nnum_microbatches = 2"}),
    [](const auto& info) { return info.param.name; });

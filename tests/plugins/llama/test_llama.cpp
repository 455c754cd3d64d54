// The Llama-family plugin against HF transformers at tp 1, 2, 4, pp 2 and pp 2 x tp 2: Llama
// (grouped-query attention with fewer KV heads than tp = 4; rope scalings linear, dynamic NTK
// and Llama 3; head_dim != hidden / heads with attention and MLP biases, gelu and a tied head;
// bf16 weights in an fp32 job), Mistral (a sliding window shorter than the generation), Qwen2
// (QKV bias, tied head), Qwen3 (per-head q / k norms), GLM (fused gate_up_proj, interleaved
// partial rotary), GLM-4 (norms on the sublayers' outputs) and a ChatGLM2 checkpoint under its
// original names (fused query_key_value; saved back in that layout). Llama (grouped-query heads)
// under sequence parallelism in every mode, for sequence lengths 11 (padded) and 16, and the
// collectives of a layer (under split_gather q / k / v and gate / up gather their input once).
#include "family_checks.h"
#include "shardformer/checkpoint_io/checkpoint_saver.h"

using namespace shardformer;
using shardformer::testing::check_decoder_against_hf;
using shardformer::testing::Layout;

namespace {

struct Case {
  std::string model, architecture, base;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.model; }

class LlamaFamily : public ::testing::TestWithParam<std::tuple<Case, Layout>> {};

TEST_P(LlamaFamily, MatchesHFAtThisLayout) {
  const auto& [c, layout] = GetParam();
  check_decoder_against_hf(c.model, c.architecture, c.base, layout);
}

const Case kCases[] = {
    {"tiny-llama", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-linear", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-dynamic", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-rope-llama3", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-options", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-llama-bf16", "LlamaForCausalLM", "LlamaModel"},
    {"tiny-mistral", "MistralForCausalLM", "MistralModel"},
    {"tiny-qwen2", "Qwen2ForCausalLM", "Qwen2Model"},
    {"tiny-qwen3", "Qwen3ForCausalLM", "Qwen3Model"},
    {"tiny-glm", "GlmForCausalLM", "GlmModel"},
    {"tiny-glm4", "Glm4ForCausalLM", "Glm4Model"},
    // ChatGLM's own classes both carry the head; GlmModel names the headless model.
    {"tiny-chatglm2", "ChatGLMModel", "GlmModel"},
};

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, LlamaFamily,
    ::testing::Combine(::testing::ValuesIn(kCases),
                       ::testing::ValuesIn(shardformer::testing::standard_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param).model,
                                             std::get<1>(info.param));
    });

// Heads that tp does not divide, split unevenly (whole KV groups per rank, or a shared KV head
// and the query heads split): SmolLM2's 9 and 3 at tp 2 (and 3, even), and 5 query heads with
// one KV head at tp 2 and 4; with pp 2 x tp 2.
class LlamaUnevenHeads : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(LlamaUnevenHeads, MatchHFAtThisLayout) {
  const auto& [model, layout] = GetParam();
  check_decoder_against_hf(model, "LlamaForCausalLM", "LlamaModel", layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, LlamaUnevenHeads,
    ::testing::Values(std::tuple{"tiny-llama-9-heads", Layout{2, 1, "tp2"}},
                      std::tuple{"tiny-llama-9-heads", Layout{3, 1, "tp3"}},
                      std::tuple{"tiny-llama-9-heads", Layout{2, 2, "pp2_tp2"}},
                      std::tuple{"tiny-llama-mqa-5-heads", Layout{2, 1, "tp2"}},
                      std::tuple{"tiny-llama-mqa-5-heads", Layout{4, 1, "tp4"}}),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// Forward and backward of the 5-layer base model at tp 2; the tp group's collectives.
void check_llama_step_collectives(const Layout& layout) {
  shardformer::testing::on_ranks(
      "tiny-llama", layout,
      [&](const shardformer::testing::ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session = shardformer::testing::layout_session(f, mesh, "LlamaModel", layout);
        mesh->tp().reset_stats();
        const at::Tensor hidden = session->model().forward(f.forward_inputs());
        const distributed::CommStats forward = mesh->tp().stats();
        hidden.pow(2).sum().backward();
        const distributed::CommStats both = mesh->tp().stats();
        constexpr int64_t kLayers = 5;
        if (layout.sequence_mode.empty()) {
          // Forward: o_proj's and down_proj's all-reduces and the embedding's; backward: the
          // input gradient of each column layer (q, k, v, gate, up).
          EXPECT_EQ(forward.all_reduces, 2 * kLayers + 1);
          EXPECT_EQ(both.all_reduces - forward.all_reduces, 5 * kLayers);
        } else {
          // split_gather: one all-gather per pair of column groups, one reduce-scatter per row
          // layer, the final gather; backward mirrors them; only the embedding all-reduces.
          EXPECT_EQ(forward.all_gathers, 2 * kLayers + 1);
          EXPECT_EQ(forward.reduce_scatters, 2 * kLayers);
          EXPECT_EQ(forward.all_reduces, 1);
          // (the row layers' gradients gathered, the column layers' inputs gathered again
          // instead of kept, and the gradient of the split after the embeddings gathered).
          EXPECT_EQ(both.reduce_scatters - forward.reduce_scatters, 2 * kLayers);
          EXPECT_EQ(both.all_gathers - forward.all_gathers, 4 * kLayers + 1);
          // Backward's one all-reduce: the final norm's weight gradient (it runs on this rank's
          // tokens, before the final gather).
          EXPECT_EQ(both.all_reduces - forward.all_reduces, 1);
        }
      });
}

TEST(LlamaCollectives, TensorParallelLayerReducesEachColumnInputGradient) {
  check_llama_step_collectives({.tp = 2, .name = "tp2"});
}

TEST(LlamaCollectives, SplitGatherLayerGathersTwiceAndReduceScattersTwice) {
  check_llama_step_collectives({.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"});
}

class LlamaSequenceParallel : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(LlamaSequenceParallel, MatchesHF) {
  const auto& [model, layout] = GetParam();
  shardformer::testing::check_sequence_parallel_against_hf(model, "LlamaForCausalLM", "LlamaModel",
                                                           layout);
}

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, LlamaSequenceParallel,
    ::testing::Combine(::testing::Values("tiny-llama", "tiny-llama-even"),
                       ::testing::ValuesIn(shardformer::testing::sequence_parallel_layouts())),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param), std::get<1>(info.param));
    });

// Mistral (a sliding window), Qwen2 (QKV bias), Qwen3 (per-head q / k norms), GLM (the fused
// gate_up_proj gathered once) and GLM-4 (sandwich norms) under each sequence-parallel mode; ring
// attention has no sliding window and refuses Mistral by name.
class FamilySequenceParallel : public ::testing::TestWithParam<std::tuple<Case, Layout>> {};

TEST_P(FamilySequenceParallel, MatchesHF) {
  const auto& [c, layout] = GetParam();
  shardformer::testing::check_sequence_parallel_against_hf(c.model, c.architecture, c.base, layout);
}

const Layout kSplitGatherTp2{.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"};
const Layout kAllToAllSp2{.name = "a2a_sp2", .sp = 2, .sequence_mode = "all_to_all"};
const Layout kRingSp2{.name = "ring_sp2", .sp = 2, .sequence_mode = "ring_attn"};
const Case kMistral{"tiny-mistral", "MistralForCausalLM", "MistralModel"};
const Case kGlm{"tiny-glm", "GlmForCausalLM", "GlmModel"};
const Case kGlm4{"tiny-glm4", "Glm4ForCausalLM", "Glm4Model"};
const Case kChatGlm2{"tiny-chatglm2", "ChatGLMForConditionalGeneration", "GlmModel"};

INSTANTIATE_TEST_SUITE_P(
    Checkpoints, FamilySequenceParallel,
    ::testing::Values(
        std::tuple{kMistral, kSplitGatherTp2}, std::tuple{kMistral, kAllToAllSp2},
        std::tuple{Case{"tiny-qwen2", "Qwen2ForCausalLM", "Qwen2Model"}, kSplitGatherTp2},
        std::tuple{Case{"tiny-qwen2", "Qwen2ForCausalLM", "Qwen2Model"}, kAllToAllSp2},
        std::tuple{Case{"tiny-qwen2", "Qwen2ForCausalLM", "Qwen2Model"}, kRingSp2},
        std::tuple{Case{"tiny-qwen3", "Qwen3ForCausalLM", "Qwen3Model"}, kSplitGatherTp2},
        std::tuple{Case{"tiny-qwen3", "Qwen3ForCausalLM", "Qwen3Model"}, kAllToAllSp2},
        std::tuple{Case{"tiny-qwen3", "Qwen3ForCausalLM", "Qwen3Model"}, kRingSp2},
        std::tuple{kGlm, kSplitGatherTp2}, std::tuple{kGlm, kAllToAllSp2},
        std::tuple{kGlm, kRingSp2}, std::tuple{kGlm4, kSplitGatherTp2},
        std::tuple{kGlm4, kAllToAllSp2}, std::tuple{kGlm4, kRingSp2},
        std::tuple{kChatGlm2, kSplitGatherTp2}, std::tuple{kChatGlm2, kAllToAllSp2},
        std::tuple{kChatGlm2, kRingSp2}),
    [](const auto& info) {
      return shardformer::testing::case_name(std::get<0>(info.param).model,
                                             std::get<1>(info.param));
    });

TEST(FamilySequenceParallelRefusal, RingAttentionRefusesASlidingWindow) {
  shardformer::testing::on_ranks(
      kMistral.model, kRingSp2,
      [&](const shardformer::testing::ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session =
            shardformer::testing::layout_session(f, mesh, kMistral.architecture, kRingSp2);
        try {
          session->forward(f.forward_inputs());
          ADD_FAILURE() << "ring attention ran Mistral's sliding window";
        } catch (const ModelError& e) {
          EXPECT_NE(std::string(e.what()).find("sliding-window"), std::string::npos) << e.what();
        }
      });
}

// Ranks that share a GPU stage their collectives through host memory over Gloo; the CPU
// stand-in of that path (every tensor staged) at pp 2 x tp 2 and under each sequence-parallel
// mode equals HF as the plain path does.
TEST(LlamaHostStaged, MatchesHFAtPp2Tp2) {
  check_decoder_against_hf("tiny-llama", "LlamaForCausalLM", "LlamaModel",
                           {.tp = 2, .pp = 2, .name = "pp2_tp2_staged", .host_staged = true});
}

TEST(LlamaHostStaged, MatchesHFUnderSequenceParallelism) {
  for (const char* mode : {"all_to_all", "ring_attn"}) {
    shardformer::testing::check_sequence_parallel_against_hf(
        "tiny-llama", "LlamaForCausalLM", "LlamaModel",
        {.name = mode, .sp = 2, .sequence_mode = mode, .host_staged = true});
  }
  shardformer::testing::check_sequence_parallel_against_hf(
      "tiny-llama", "LlamaForCausalLM", "LlamaModel",
      {.tp = 2, .name = "sg", .sequence_mode = "split_gather", .host_staged = true});
}

// config.json keys that change no math (bookkeeping, token ids, generation defaults, export
// tools' leftovers) load and the logits still equal HF's; keys that change the math are refused.
TEST(LlamaConfigKeys, ThoseThatChangeNoMathLoadAndOthersAreRefused) {
  shardformer::testing::check_config_keys_that_change_no_math("tiny-llama", "families",
                                                              "LlamaForCausalLM", "forward_logits");
  shardformer::testing::check_config_keys_that_change_no_math(
      "tiny-mistral", "families", "MistralForCausalLM", "forward_logits");
  shardformer::testing::check_config_keys_that_change_no_math("tiny-qwen2", "families",
                                                              "Qwen2ForCausalLM", "forward_logits");
  shardformer::testing::check_config_keys_that_change_no_math("tiny-qwen3", "families",
                                                              "Qwen3ForCausalLM", "forward_logits");
}

}  // namespace

// A ChatGLM2 checkpoint saved from pp 2 x tp 2 keeps the layout it was loaded from: its tensor
// names, query_key_value fused again from the ranks' q / k / v pieces, every value bitwise
// equal; only the rotary frequencies buffer, recomputed, is not written.
TEST(ChatGlmLayout, SavesInTheLayoutItWasLoadedFrom) {
  const Layout layout{2, 2, "pp2_tp2"};
  const std::filesystem::path saved = std::filesystem::path(::testing::TempDir()) / "chatglm_saved";
  std::filesystem::remove_all(saved);
  shardformer::testing::on_ranks(
      "tiny-chatglm2", layout,
      [&](const shardformer::testing::ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
        const auto session = shardformer::testing::layout_session(f, mesh, "ChatGLMModel", layout);
        save_model(session->model(), f.checkpoint.config().path(), saved, mesh);
      });
  const Checkpoint original(shardformer::testing::models_dir() / "tiny-chatglm2");
  const Checkpoint written(saved);
  std::vector<std::string> expected = original.tensor_names();
  std::erase(expected, "transformer.rotary_pos_emb.inv_freq");
  ASSERT_EQ(written.tensor_names(), expected);
  for (const std::string& name : expected) {
    EXPECT_TRUE(at::equal(written.read(name), original.read(name))) << name;
  }
  EXPECT_EQ(written.config().model_type(), "chatglm");
  std::filesystem::remove_all(saved);
}

// A ChatGLM config.json whose switches select code GLM does not have is refused by key.
TEST(ChatGlmLayout, RefusesSwitchesGlmDoesNotHave) {
  const shardformer::testing::ModelFixture f("tiny-chatglm2", "families");
  for (const auto& entry : std::vector<std::pair<std::string, nlohmann::json>>{
           {"rmsnorm", false},
           {"apply_residual_connection_post_layernorm", true},
           {"add_bias_linear", true},
           {"pre_seq_len", 16},
           {"quantization_bit", 4}}) {
    const std::string& key = entry.first;  // named, not bound: Clang 14 cannot capture bindings
    const nlohmann::json& value = entry.second;
    const auto dir = shardformer::testing::edited_checkpoint(
        "tiny-chatglm2", "refused_" + key, [&](nlohmann::json& c) { c[key] = value; });
    try {
      f.session({.checkpoint = dir});
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {  // the plugin's CheckpointError, as the host reports it
      EXPECT_NE(std::string(e.what()).find("config.json: " + key), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
  }
}

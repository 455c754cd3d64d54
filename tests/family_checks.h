// The checks every family passes at every layout, written once: on the ranks of a tp x pp layout
// (forked, Gloo), the model built through a Session as a job builds it gives HF's outputs, loss,
// every parameter's gradient (gathered over tp) and, for decoders, greedy generations (with and
// without an early eos), from tools/gen_family_references.py.
#pragma once

#include "model_fixture.h"
#include "multiprocess.h"
#include "shardformer/error.h"
#include "shardformer/training/gradients.h"

#include <ATen/Parallel.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

namespace shardformer::testing {

struct Layout {
  int tp = 1, pp = 1;
  std::string name = "";
  // Sequence parallelism: the sp axis (all_to_all, ring_attn) and the mode ("": none).
  int sp = 1;
  std::string sequence_mode = "";
  bool sequence_overlap = false;
  // Collectives as ranks sharing a GPU run them (MeshOptions::host_staging), on the CPU stand-in.
  bool host_staged = false;
  int world() const { return tp * pp * sp; }
};

inline void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

// tp 1, 2, 4; pp 2; pp 2 x tp 2 (1F1B, 2 micro-batches).
inline std::vector<Layout> standard_layouts() {
  return {{1, 1, "tp1"}, {2, 1, "tp2"}, {4, 1, "tp4"}, {1, 2, "pp2"}, {2, 2, "pp2_tp2"}};
}

// Runs body(fixture, mesh or null, rank) on the ranks of `layout` for checkpoint `model`.
template <typename Body>
void on_ranks(const std::string& model, const Layout& layout, Body body) {
  expect_all_ranks_passed(run_ranks(layout.world(), [&](int rank, int port) {
    at::set_num_threads(1);  // several ranks share this machine's cores
    const ModelFixture f(model, "families");
    std::unique_ptr<distributed::ProcessMesh> mesh;
    if (layout.world() > 1) {
      distributed::MeshOptions options = local_mesh_options(port);
      if (layout.host_staged) {
        options.host_staging = distributed::MeshOptions::HostStaging::kEveryTensor;
      }
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank, distributed::MeshShape{.pp = layout.pp, .sp = layout.sp, .tp = layout.tp}, options);
    }
    body(f, mesh.get(), rank);
  }));
}

// The session of `architecture` at the mesh's layout (pipelines: 1F1B, 2 micro-batches), with
// the layout's sequence parallelism.
inline std::unique_ptr<Session> layout_session(const ModelFixture& f,
                                               const distributed::ProcessMesh* mesh,
                                               const std::string& architecture,
                                               const Layout& layout = {},
                                               c10::ScalarType dtype = c10::kFloat) {
  SessionOptions options{.architecture = architecture, .dtype = dtype};
  if (!layout.sequence_mode.empty()) {
    options.shard.enable_sequence_parallelism = true;
    options.shard.sequence_parallelism_mode = parse_sequence_mode(layout.sequence_mode);
    options.shard.enable_sequence_overlap = layout.sequence_overlap;
  }
  options.pipeline.num_microbatches = mesh != nullptr && mesh->shape().pp > 1 ? 2 : 0;
  return f.session(options, mesh);
}

// forward() gives `logits_key`; a training step on `labels_key` gives `loss_key` and every
// gradient "<grad_prefix><name>" (gathered over tp; a stage holds some of them). The step runs
// in eval mode, as HF's references do, or in training mode (`train_mode`: stochastic depth).
inline void check_output_loss_and_grads(const ModelFixture& f, Session& session,
                                        const distributed::ProcessMesh* mesh,
                                        const std::string& logits_key,
                                        const std::string& labels_key, const std::string& loss_key,
                                        const std::string& grad_prefix, bool train_mode = false) {
  const bool output_here = session.holds_output();
  const at::Tensor logits = session.forward(f.forward_inputs());
  if (output_here) expect_close_to_hf(f, logits, logits_key, kOutputAtol, 0.0, logits_key);
  session.model().train(train_mode);
  const at::Tensor loss = session.train_step(f.forward_inputs(), f.ref(labels_key));
  session.model().eval();
  training::sync_sequence_gradients(session.model());
  if (output_here) expect_close_to_hf(f, loss.reshape({1}), loss_key, kOutputAtol, 0.0, loss_key);
  const auto grads =
      gather_parameters(session.model(), mesh ? &mesh->tp() : nullptr, /*grads=*/true);
  const std::vector<std::string> names = f.grad_names(grad_prefix);
  const std::set<std::string> expected(names.begin(), names.end());
  for (const auto& [name, grad] : grads) {
    if (!expected.contains(name)) {
      ADD_FAILURE() << "parameter " << name << " has no HF gradient";
      continue;
    }
    expect_close_to_hf(f, grad, grad_prefix + name, kGradAtol, kGradRtol, "grad of " + name);
  }
  if (mesh == nullptr || mesh->shape().pp == 1) {
    EXPECT_EQ(grads.size(), expected.size());
  }
}

// A bf16 (or fp16) job's logits: no further from HF's fp32 logits than twice HF's own in that
// dtype (both round the same weights; they differ in the order of operations). Catches what
// only a narrow dtype meets: values that do not fit it (masks), casts, fp32 paths taken for
// bf16 tensors. The reference is "forward_logits_bfloat16" ("_float16").
inline void check_bfloat16_logits(const ModelFixture& f, Session& session,
                                  at::ScalarType dtype = at::kBFloat16) {
  const at::Tensor logits = session.forward(f.forward_inputs());
  if (!session.holds_output()) return;
  EXPECT_EQ(logits.scalar_type(), dtype);
  const std::string name = dtype == at::kHalf ? "float16" : "bfloat16";
  const at::Tensor exact = f.ref("forward_logits").to(at::kFloat);
  const double hf_error =
      (f.ref("forward_logits_" + name).to(at::kFloat) - exact).abs().max().item<double>();
  const double error = (logits.to(at::kFloat) - exact).abs().max().item<double>();
  EXPECT_LE(error, 2 * hf_error) << name << " logits: max |ours - HF fp32| = " << error << ", HF "
                                 << name << "'s = " << hf_error;
}

// An image classifier (`classifier`, e.g. ViTForImageClassification) and its base model
// (`base`) from the checkpoint of `f` at this rank's layout: logits, loss and every gradient, the
// base model's last hidden state, its pooler output (without a pipeline: both outputs of one
// forward) and the classifier's bf16 logits, against HF; the training step in training mode
// where `train_mode` says.
inline void check_image_classifier_and_base(const ModelFixture& f,
                                            const distributed::ProcessMesh* mesh,
                                            const std::string& classifier, const std::string& base,
                                            bool train_mode = false) {
  check_output_loss_and_grads(f, *layout_session(f, mesh, classifier), mesh, "forward_logits",
                              "train_labels", "train_loss", "grad.", train_mode);
  const auto session = layout_session(f, mesh, base);
  const at::Tensor hidden = session->forward(f.forward_inputs());
  if (session->holds_output()) {
    expect_close_to_hf(f, hidden, "forward_last_hidden_state", kOutputAtol, 0.0,
                       "last hidden state");
  }
  if (mesh == nullptr || mesh->shape().pp == 1) {
    at::NoGradGuard no_grad;
    const auto outputs = session->model().forward_all(f.forward_inputs());
    expect_close(outputs.at("pooler_output"), f.ref("forward_pooler_output"), kOutputAtol, 0.0,
                 "pooler output");
  }
  check_bfloat16_logits(f, *layout_session(f, mesh, classifier, {}, at::kBFloat16));
}

// `architecture` of checkpoint `model` refuses split_gather sequence parallelism at tp 2 with
// an error naming `family`.
inline void expect_sequence_parallelism_refused(const std::string& model,
                                                const std::string& architecture,
                                                const std::string& family) {
  const Layout layout{.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"};
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    try {
      layout_session(f, mesh, architecture, layout);
      ADD_FAILURE() << architecture << " ran under sequence parallelism";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(family), std::string::npos) << e.what();
    }
  });
}

// The checkpoint `model` (references in test-data/families) as `architecture` (a
// ...ForCausalLM) and its base model `base_architecture` at `layout`, in fp32 and bf16.
inline void check_decoder_against_hf(const std::string& model, const std::string& architecture,
                                     const std::string& base_architecture, const Layout& layout) {
  on_ranks(model, layout,
           [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int rank) {
             const auto session = layout_session(f, mesh, architecture);
             check_output_loss_and_grads(f, *session, mesh, "forward_logits", "train_labels",
                                         "train_loss", "grad.");

             for (const bool with_eos : {false, true}) {
               const GenerationResult result =
                   session->generate(f.prompts(), f.generation_config(with_eos));
               const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
               EXPECT_TRUE(at::equal(result.sequences, f.ref(key)))
                   << key << ", rank " << rank << ": ours\n"
                   << result.sequences << "\nHF\n"
                   << f.ref(key);
             }

             const auto base = layout_session(f, mesh, base_architecture);
             const at::Tensor hidden = base->forward(f.forward_inputs());
             if (base->holds_output()) {
               expect_close_to_hf(f, hidden, "forward_last_hidden_state", kOutputAtol, 0.0,
                                  "hidden states");
             }

             check_bfloat16_logits(f, *layout_session(f, mesh, architecture, {}, at::kBFloat16));
           });
}

// The checkpoint `model` as `architecture` (a ...ForCausalLM) and its base model at a
// sequence-parallel `layout`: logits, loss, every gradient and the base model's hidden states
// equal HF's; generation is refused with a ConfigError.
inline void check_sequence_parallel_against_hf(const std::string& model,
                                               const std::string& architecture,
                                               const std::string& base_architecture,
                                               const Layout& layout) {
  on_ranks(model, layout, [&](const ModelFixture& f, const distributed::ProcessMesh* mesh, int) {
    const auto session = layout_session(f, mesh, architecture, layout);
    ASSERT_TRUE(session->model().sequence_parallelism().active());
    check_output_loss_and_grads(f, *session, mesh, "forward_logits", "train_labels", "train_loss",
                                "grad.");
    GenerationConfig two_tokens;
    two_tokens.max_new_tokens = 2;
    EXPECT_THROW(session->generate({{1, 2, 3}}, two_tokens), ConfigError);
    const auto base = layout_session(f, mesh, base_architecture, layout);
    const at::Tensor hidden = base->forward(f.forward_inputs());
    if (base->holds_output()) {
      expect_close_to_hf(f, hidden, "forward_last_hidden_state", kOutputAtol, 0.0, "hidden states");
    }
    // Without an attention mask: the rows that have no padding equal HF's.
    ForwardInputs unmasked = f.forward_inputs();
    const at::Tensor full_rows = unmasked.attention_mask.all(1).nonzero().view(-1);  // [rows]
    unmasked.attention_mask = at::Tensor();
    const at::Tensor plain = base->forward(unmasked);
    if (base->holds_output()) {
      expect_close_to_hf(f, plain.index_select(0, full_rows), "forward_last_hidden_state",
                         kOutputAtol, 0.0, "hidden states without a mask", full_rows);
    }
  });
}

// tp / sp 2 and 4 in each mode (split_gather on tp, with and without overlap; all_to_all and
// ring_attn on sp, alone and with tp 2), and each mode with pp 2.
inline std::vector<Layout> sequence_parallel_layouts() {
  return {
      {.tp = 2, .name = "sg_tp2", .sequence_mode = "split_gather"},
      {.tp = 4, .name = "sg_tp4", .sequence_mode = "split_gather"},
      {.tp = 2,
       .name = "sg_overlap_tp2",
       .sequence_mode = "split_gather",
       .sequence_overlap = true},
      {.tp = 2, .pp = 2, .name = "sg_tp2_pp2", .sequence_mode = "split_gather"},
      {.name = "a2a_sp2", .sp = 2, .sequence_mode = "all_to_all"},
      {.name = "a2a_sp4", .sp = 4, .sequence_mode = "all_to_all"},
      {.tp = 2, .name = "a2a_sp2_tp2", .sp = 2, .sequence_mode = "all_to_all"},
      {.pp = 2, .name = "a2a_sp2_pp2", .sp = 2, .sequence_mode = "all_to_all"},
      {.name = "ring_sp2", .sp = 2, .sequence_mode = "ring_attn"},
      {.name = "ring_sp4", .sp = 4, .sequence_mode = "ring_attn"},
      {.tp = 2, .name = "ring_sp2_tp2", .sp = 2, .sequence_mode = "ring_attn"},
      {.pp = 2, .name = "ring_sp2_pp2", .sp = 2, .sequence_mode = "ring_attn"},
  };
}

// A copy of checkpoint `model` in a folder of its own whose config.json `edit` changed; the
// other files link to the original's.
inline std::filesystem::path edited_checkpoint(const std::string& model, const std::string& tag,
                                               const std::function<void(nlohmann::json&)>& edit) {
  namespace fs = std::filesystem;
  const fs::path from = models_dir() / model;
  const fs::path to = fs::temp_directory_path() / (std::string("shardformer-") + model + "-" + tag +
                                                   "-" + std::to_string(::getpid()));
  fs::remove_all(to);
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    if (entry.path().filename() != "config.json") {
      fs::create_symlink(entry.path(), to / entry.path().filename());
    }
  }
  nlohmann::json config = nlohmann::json::parse(std::ifstream(from / "config.json"));
  edit(config);
  std::ofstream(to / "config.json") << config.dump(2);
  return to;
}

// config.json as checkpoints in the wild carry it (as HF's save_pretrained and the tools that
// export models write it): keys that change no math (the SDK's list, checkpoint_usage.cpp) load,
// and `architecture` still gives HF's `logits_key`; keys that change the math are refused, each
// named.
inline void check_config_keys_that_change_no_math(const std::string& model,
                                                  const std::string& reference_dir,
                                                  const std::string& architecture,
                                                  const std::string& logits_key) {
  const ModelFixture f(model, reference_dir);
  const std::filesystem::path harmless = edited_checkpoint(model, "harmless", [](auto& c) {
    c["_model_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct";
    c["_commit_hash"] = "0123456789abcdef0123456789abcdef01234567";
    c["unk_token_id"] = 0;
    c["mask_token_id"] = 3;
    c["transformers.js_config"] = {{"kv_cache_dtype", {{"q4f16", "float16"}}}};
    c["is_llama_config"] = true;
    c["rope_interleaved"] = false;
    c["max_new_tokens"] = 20;
    c["use_return_dict"] = true;
    c["output_past"] = true;
    c["auto_map"] = {{"AutoConfig", "configuration_custom.CustomConfig"}};
  });
  SessionOptions options{.checkpoint = harmless, .architecture = architecture};
  expect_close_to_hf(f, f.session(options)->forward(f.forward_inputs()), logits_key, kOutputAtol,
                     0.0, "logits with harmless config.json keys");
  const std::filesystem::path changed = edited_checkpoint(model, "changed", [](auto& c) {
    c["quantization_config"] = {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}};
    c["rope_interleaved"] = true;
  });
  options.checkpoint = changed;
  try {
    f.session(options);
    ADD_FAILURE() << model << ": keys that change the model were accepted";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'quantization_config'"), std::string::npos) << what;
    EXPECT_NE(what.find("'rope_interleaved'"), std::string::npos) << what;
  }
  std::filesystem::remove_all(harmless);
  std::filesystem::remove_all(changed);
}

// An encoder-decoder layout: under a pipeline, the layers of each stage (the encoder's, then the
// decoder's).
struct StackLayout {
  Layout layout;
  std::vector<int64_t> layers_per_stage{};
};

inline void PrintTo(const StackLayout& l, std::ostream* os) { *os << l.layout.name; }

// tp 1, 2, 4; pp 2 with the stage boundary inside the encoder, at its end and inside the
// decoder of a model of 3 encoder and 2 decoder layers; pp 2 x tp 2 (1F1B, 2 micro-batches).
inline std::vector<StackLayout> encoder_decoder_layouts() {
  return {{{1, 1, "tp1"}},
          {{2, 1, "tp2"}},
          {{4, 1, "tp4"}},
          {{1, 2, "pp2_in_encoder"}, {2, 3}},
          {{1, 2, "pp2_at_encoder_end"}, {3, 2}},
          {{1, 2, "pp2_in_decoder"}, {4, 1}},
          {{2, 2, "pp2_tp2"}, {3, 2}}};
}

// The session of `architecture` at an encoder-decoder layout.
inline std::unique_ptr<Session> stack_session(const ModelFixture& f,
                                              const distributed::ProcessMesh* mesh,
                                              const StackLayout& layout,
                                              const std::string& architecture,
                                              c10::ScalarType dtype = c10::kFloat) {
  SessionOptions options{.architecture = architecture, .dtype = dtype};
  if (layout.layout.pp > 1) {
    options.pipeline.num_microbatches = 2;
    options.pipeline.layers_per_stage = layout.layers_per_stage;
  }
  return f.session(options, mesh);
}

// An encoder-decoder LM's logits, loss (with decoder inputs, and from the labels alone) and
// every gradient equal HF's.
inline void check_seq2seq_output_loss_and_grads(const ModelFixture& f, Session& session,
                                                const distributed::ProcessMesh* mesh) {
  ASSERT_TRUE(session.model().is_encoder_decoder());
  check_output_loss_and_grads(f, session, mesh, "forward_logits", "train_labels", "train_loss",
                              "grad.");
  // HF's labels= shifts the labels right into the decoder's inputs.
  ForwardInputs from_labels = f.forward_inputs();
  from_labels.decoder_input_ids = at::Tensor();
  const at::Tensor loss = session.loss(from_labels, f.ref("train_labels"));
  if (session.holds_output()) {
    expect_close_to_hf(f, loss.reshape({1}), "train_loss", kOutputAtol, 0.0,
                       "loss from labels alone");
  }
}

// The string a parameterised test's name ends with: "tiny_opt_pp2".
inline std::string case_name(const std::string& model, const Layout& layout) {
  std::string name = model + "_" + layout.name;
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

}  // namespace shardformer::testing

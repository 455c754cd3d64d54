// What the model-family tests share: the plugins loaded as the host loads them, a tiny
// checkpoint with HF transformers' reference outputs (tools/gen_gpt2_references.py,
// tools/gen_family_references.py), models built through the SDK's Session as jobs build them,
// and comparison helpers with the documented tolerances.
#pragma once

#include "plugin_registry.h"
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/distributed/process_mesh.h"
#include "shardformer/generation.h"
#include "shardformer/runtime/session.h"
#include "test_env.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace shardformer::testing {

class ModelFixture {
 public:
  // `model`: a folder of the models directory, compared with
  // test-data/<reference_dir>/<model>.safetensors.
  ModelFixture(const std::string& model, const std::string& reference_dir)
      : ModelFixture(model,
                     ReferenceFile{test_data_dir() / reference_dir / (model + ".safetensors")}) {}
  struct ReferenceFile {
    std::filesystem::path path;
  };
  ModelFixture(const std::string& model, const ReferenceFile& reference_file)
      : registry(host::PluginRegistry::discover({plugin_dir()})),
        checkpoint(models_dir() / model),
        reference(reference_file.path) {}

  // A session on this rank as a job builds it: options.checkpoint defaults to the fixture's,
  // mesh null for one rank.
  std::unique_ptr<Session> session(SessionOptions options = {},
                                   const distributed::ProcessMesh* mesh = nullptr) const {
    if (options.checkpoint.empty()) options.checkpoint = checkpoint.directory();
    return std::make_unique<Session>(
        std::move(options), [this](const ModelArgs& args) { return registry.create_model(args); },
        mesh);
  }
  // The model of such a session (it keeps what it needs once built).
  std::shared_ptr<Model> build(const std::string& architecture,
                               const distributed::ProcessMesh* mesh = nullptr,
                               SessionOptions options = {}) const {
    options.architecture = architecture;
    return session(std::move(options), mesh)->model_ptr();
  }

  at::Tensor ref(const std::string& name) const { return reference.read(name); }
  // Every parameter HF computed a gradient for ("<prefix><name>" in the reference), by name.
  std::vector<std::string> grad_names(const std::string& prefix = "grad.") const {
    std::vector<std::string> names;
    for (const TensorInfo& t : reference.tensors()) {
      if (t.name.starts_with(prefix)) names.push_back(t.name.substr(prefix.size()));
    }
    return names;
  }
  int64_t ref_scalar(const std::string& name) const { return ref(name).item<int64_t>(); }

  // HF's generation settings; with_eos: stop at the reference's eos as HF did.
  GenerationConfig generation_config(bool with_eos) const {
    GenerationConfig config;
    config.max_new_tokens = ref_scalar("generate_max_new_tokens");
    config.pad_token_id = ref_scalar("generate_pad_token_id");
    if (with_eos) config.eos_token_id = ref_scalar("generate_eos_token_id");
    if (reference.contains("generate_decoder_start_token_id")) {  // encoder-decoder models
      config.decoder_start_token_id = ref_scalar("generate_decoder_start_token_id");
    }
    return config;
  }

  // Prompts recovered from HF's left-padded generation inputs.
  std::vector<std::vector<int64_t>> prompts() const {
    const at::Tensor ids = ref("generate_input_ids"), mask = ref("generate_attention_mask");
    std::vector<std::vector<int64_t>> result(ids.size(0));
    for (int64_t row = 0; row < ids.size(0); ++row) {
      for (int64_t col = 0; col < ids.size(1); ++col) {
        if (mask[row][col].item<int64_t>() == 1)
          result[row].push_back(ids[row][col].item<int64_t>());
      }
    }
    return result;
  }

  ForwardInputs forward_inputs() const {
    ForwardInputs inputs;
    if (reference.contains("forward_input_features")) {  // audio: [batch, mels, frames]
      inputs.input_features = ref("forward_input_features");
    } else if (reference.contains("forward_pixel_values")) {  // images: [batch, c, h, w]
      inputs.pixel_values = ref("forward_pixel_values");
      if (reference.contains("forward_input_ids")) {  // BLIP-2: a prompt with image tokens
        inputs.input_ids = ref("forward_input_ids");  // [batch, seq]
      }
    } else {
      inputs.input_ids = ref("forward_input_ids");            // [batch, seq]
      inputs.attention_mask = ref("forward_attention_mask");  // [batch, seq]
    }
    if (reference.contains("forward_token_type_ids")) {
      inputs.token_type_ids = ref("forward_token_type_ids");  // [batch, seq]
    }
    if (reference.contains("forward_decoder_input_ids")) {          // encoder-decoder models
      inputs.decoder_input_ids = ref("forward_decoder_input_ids");  // [batch, tgt]
    }
    return inputs;
  }
  at::Tensor forward(Model& model) const {
    at::NoGradGuard no_grad;
    return model.forward(forward_inputs());
  }

  host::PluginRegistry registry;
  Checkpoint checkpoint;
  SafetensorsFile reference;
};

// A mesh of forked local ranks on `port`; a collective or receive fails after `timeout`. Every
// all-gather and fp32 all-reduce goes through shared memory in 4 KiB chunks, so the families'
// tests against HF cover that path at tiny sizes (the host's jobs keep the 256 KiB threshold,
// and their tests cover Gloo's).
inline distributed::MeshOptions local_mesh_options(
    int port, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  distributed::MeshOptions options;
  options.master_port = port;
  options.timeout = timeout;
  options.shared_memory_min_bytes = 0;
  options.shared_memory_chunk_bytes = 4096;
  return options;
}

// |actual - expected| <= atol + rtol * |expected| everywhere, reporting the worst element.
inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, double atol,
                         double rtol, const std::string& what) {
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const at::Tensor excess = (actual - expected).abs() - rtol * expected.abs();
  const double worst = excess.max().item<double>();
  EXPECT_LE(worst, atol) << what << ": max |ours - HF| - rtol |HF| = " << worst << " (max |diff| "
                         << (actual - expected).abs().max().item<double>() << ")";
}

// The documented fp32 tolerances: logits, hidden states and losses atol 1e-5; gradients atol
// 1e-6 with rtol 1e-4.
inline constexpr double kOutputAtol = 1e-5, kGradAtol = 1e-6, kGradRtol = 1e-4;

// `actual` (an fp32 job's) against reference `key`. Where the reference file holds HF's float64
// value and, as "hf_fp32.<key>", HF's own fp32 one (tools/gen_family_references.py), each element
// must lie within atol + rtol |exact| of the exact value, or no further from it than twice HF's
// fp32 result lies at its worst on that tensor: an fp32 model cannot be held closer to the
// truth than the oracle's own fp32 run is, and an element-by-element bound would hold ours to
// wherever HF's rounding happened to land near the exact value (on an Intel CPU's MKL path
// BLOOM's logits of size 30 came within 1.56e-5, HF's within 1.37e-5, but past twice HF's at
// one element). Otherwise the plain check against `key`. `rows`: compare these rows only.
inline void expect_close_to_hf(const ModelFixture& f, const at::Tensor& actual,
                               const std::string& key, double atol, double rtol,
                               const std::string& what, const at::Tensor& rows = {}) {
  const auto select = [&](const at::Tensor& t) {
    return rows.defined() ? t.index_select(0, rows) : t;
  };
  const at::Tensor exact = select(f.ref(key));
  if (!f.reference.contains("hf_fp32." + key)) {
    expect_close(actual, exact, atol, rtol, what);
    return;
  }
  ASSERT_EQ(actual.sizes(), exact.sizes()) << what;
  const at::Tensor hf_error = (select(f.ref("hf_fp32." + key)).to(at::kDouble) - exact).abs();
  const at::Tensor error = (actual.to(at::kDouble) - exact).abs();
  const at::Tensor allowed =
      at::clamp_min(atol + rtol * exact.abs(), 2 * hf_error.max().item<double>());
  const double worst = (error - allowed).max().item<double>();
  EXPECT_LE(worst, 0.0) << what << ": max |ours - exact| = " << error.max().item<double>()
                        << ", HF fp32's " << hf_error.max().item<double>() << ", exceeding by "
                        << worst;
}

// The loss and every gradient after one backward pass against the reference's; `tp` gathers
// split gradients (null: one rank).
inline void expect_loss_and_grads_match(const ModelFixture& f, Model& model,
                                        const distributed::ProcessGroup* tp) {
  const at::Tensor loss = model.loss(f.forward_inputs(), f.ref("train_labels"));
  expect_close_to_hf(f, loss.detach().reshape({1}), "train_loss", kOutputAtol, 0.0, "loss");
  loss.backward();
  const auto grads = gather_parameters(model, tp, /*grads=*/true);
  EXPECT_EQ(grads.size(), f.grad_names().size());
  for (const auto& [name, grad] : grads) {
    expect_close_to_hf(f, grad, "grad." + name, kGradAtol, kGradRtol, "grad of " + name);
  }
}

}  // namespace shardformer::testing

// The check every decoder family passes at every layout, written once: on the ranks of a
// tp x pp layout (forked, Gloo), the model built through a Session as a job builds it gives HF's
// logits, base-model hidden states, loss, every parameter's gradient (gathered over tp) and
// greedy generations (with and without an early eos), from tools/gen_family_references.py.
#pragma once

#include "model_fixture.h"
#include "multiprocess.h"

#include <ATen/Parallel.h>

#include <set>
#include <string>

namespace shardformer::testing {

struct Layout {
  int tp = 1, pp = 1;
  std::string name = "";
};

inline void PrintTo(const Layout& layout, std::ostream* os) { *os << layout.name; }

// tp 1, 2, 4; pp 2; pp 2 x tp 2 (1F1B, 2 micro-batches).
inline std::vector<Layout> standard_layouts() {
  return {{1, 1, "tp1"}, {2, 1, "tp2"}, {4, 1, "tp4"}, {1, 2, "pp2"}, {2, 2, "pp2_tp2"}};
}

// The checkpoint `model` (references in test-data/families) as `architecture` (a
// ...ForCausalLM) and its base model `base_architecture` at `layout`.
inline void check_decoder_against_hf(const std::string& model, const std::string& architecture,
                                     const std::string& base_architecture, const Layout& layout) {
  expect_all_ranks_passed(run_ranks(layout.tp * layout.pp, [&](int rank, int port) {
    at::set_num_threads(1);  // several ranks share this machine's cores
    const ModelFixture f(model, "families");
    std::unique_ptr<distributed::ProcessMesh> mesh;
    if (layout.tp * layout.pp > 1) {
      mesh = std::make_unique<distributed::ProcessMesh>(
          rank, distributed::MeshShape{.pp = layout.pp, .tp = layout.tp},
          local_mesh_options(port));
    }
    SessionOptions options{.architecture = architecture};
    options.pipeline.num_microbatches = layout.pp > 1 ? 2 : 0;
    const auto session = f.session(options, mesh.get());
    const bool output_here = session->holds_output();
    const at::Tensor logits = session->forward(f.forward_inputs());
    if (output_here) expect_close(logits, f.ref("forward_logits"), kOutputAtol, 0.0, "logits");

    const at::Tensor loss = session->train_step(f.forward_inputs(), f.ref("train_labels"));
    if (output_here) expect_close(loss.reshape({1}), f.ref("train_loss"), kOutputAtol, 0.0, "loss");
    const auto grads =
        gather_parameters(session->model(), mesh ? &mesh->tp() : nullptr, /*grads=*/true);
    const std::vector<std::string> names = f.grad_names();
    const std::set<std::string> expected(names.begin(), names.end());
    for (const auto& [name, grad] : grads) {
      if (!expected.contains(name)) {
        ADD_FAILURE() << "parameter " << name << " has no HF gradient";
        continue;
      }
      expect_close(grad, f.ref("grad." + name), kGradAtol, kGradRtol, "grad of " + name);
    }
    if (layout.pp == 1) {
      EXPECT_EQ(grads.size(), expected.size());
    }

    for (const bool with_eos : {false, true}) {
      const GenerationResult result = session->generate(f.prompts(), f.generation_config(with_eos));
      const std::string key = with_eos ? "generate_eos_sequences" : "generate_sequences";
      EXPECT_TRUE(at::equal(result.sequences, f.ref(key)))
          << key << ", rank " << rank << ": ours\n"
          << result.sequences << "\nHF\n"
          << f.ref(key);
    }

    SessionOptions base_options = options;
    base_options.architecture = base_architecture;
    const auto base = f.session(base_options, mesh.get());
    const at::Tensor hidden = base->forward(f.forward_inputs());
    if (base->holds_output()) {
      expect_close(hidden, f.ref("forward_last_hidden_state"), kOutputAtol, 0.0, "hidden states");
    }
  }));
}

}  // namespace shardformer::testing

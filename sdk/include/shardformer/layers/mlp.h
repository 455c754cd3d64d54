// The two-layer MLP of GPT-J, GPT-NeoX, GPT-Neo, Falcon and T5: out(act(in(x))), under the
// family's HF names (fc_in / fc_out, dense_h_to_4h / dense_4h_to_h, c_fc / c_proj, wi / wo), with
// T5's dropout on the activation. Under tensor
// parallelism `in` is column-parallel and `out` row-parallel (one all-reduce), as the policy says.
#pragma once

#include "shardformer/build_context.h"
#include "shardformer/layers/activation.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/linear.h"

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace shardformer::layers {

struct MLPOptions {
  int64_t hidden_size = 0, intermediate_size = 0;
  Activation activation = Activation::kGeluNew;
  bool bias = true;
  // Module paths, dotted ones nested (ViT's "intermediate.dense", "output.dense").
  std::string in_name = "dense_h_to_4h", out_name = "dense_4h_to_h";
  double inner_dropout = 0;              // > 0: a dropout on act(in(x)) in training (T5, Whisper)
  std::string dropout_name = "dropout";  // its module name (Whisper: "activation_dropout")
  // HF modules whose in / out sit directly in the layer (Whisper's fc1 / fc2): the MLP registers
  // its modules on `owner` (its own parameter names then are the owner's), null: on itself.
  torch::nn::Module* owner = nullptr;
  // The out projection's dtype where it is not the model's (T5 in fp16 keeps wo in fp32, HF's
  // _keep_in_fp32_modules): its input is cast to it, and its output stays in it.
  c10::ScalarType out_dtype = c10::ScalarType::Undefined;
};

class MLP : public torch::nn::Module {
 public:
  MLP(const BuildContext& ctx, const MLPOptions& options);  // ctx: the MLP's module
  at::Tensor forward(const at::Tensor& x);                  // [batch, seq, hidden] -> same
  // residual + dropout(forward(x)) and, given `norm`, its norm (add_to_residual: joined to
  // out's all-reduce where it sums its ranks' products).
  ResidualSum forward_residual(const at::Tensor& x, const at::Tensor& residual,
                               const ResidualNorm* norm, Dropout* dropout = nullptr,
                               const SequenceSplit* sequence = nullptr);

 private:
  // act(in(x)) [batch, seq, intermediate/tp], in the out projection's dtype
  at::Tensor hidden(const at::Tensor& x);

  Activation activation_;
  c10::ScalarType out_dtype_;  // Undefined: the model's
  std::shared_ptr<Linear> in_, out_;
  std::shared_ptr<Dropout> dropout_;  // T5's, or null
};

}  // namespace shardformer::layers

// Dropout on one rank: the drop rate within statistical bounds, the expectation preserved,
// identity in eval mode, probabilities outside [0, 1) refused, and stream states that save and
// restore exactly.
#include "shardformer/build_context.h"
#include "shardformer/checkpoint_io/checkpoint.h"
#include "shardformer/checkpoint_io/safetensors.h"
#include "shardformer/layers/drop_path.h"
#include "shardformer/layers/dropout.h"
#include "test_util.h"

#include <ATen/ATen.h>

#include <cmath>

using namespace shardformer;

namespace {

class DropoutTest : public shardformer::testing::TempDirTest<> {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    shardformer::testing::write_text(dir_ / "config.json", "{}");
    save_safetensors(dir_ / "model.safetensors", {{"unused", at::zeros({1})}});
    checkpoint_ = std::make_unique<Checkpoint>(dir_);
  }
  BuildContext ctx() const { return BuildContext(*checkpoint_, at::kFloat, at::kCPU); }

  std::unique_ptr<Checkpoint> checkpoint_;
};

}  // namespace

TEST_F(DropoutTest, DropRateAndExpectationWithinStatisticalBounds) {
  constexpr int64_t n = 1 << 20;
  for (const double p : {0.1, 0.5}) {
    layers::Dropout dropout(ctx().child("drop"), p);
    dropout.train();
    const at::Tensor x = at::rand({n}, at::kDouble) + 0.5;  // mean 1
    const at::Tensor y = dropout.forward(x);
    const double sigma_rate = std::sqrt(p * (1 - p) / n);
    EXPECT_NEAR((y == 0).to(at::kDouble).mean().item<double>(), p, 5 * sigma_rate) << "p " << p;
    // E[y] = E[x]: kept elements are scaled by 1 / (1 - p). Var(y_i) <= E[x^2] p / (1 - p).
    const double second_moment = (x * x).mean().item<double>();
    const double sigma_mean = std::sqrt(second_moment * p / (1 - p) / n);
    EXPECT_NEAR(y.mean().item<double>(), x.mean().item<double>(), 5 * sigma_mean) << "p " << p;
    EXPECT_TRUE(at::allclose(y.masked_select(y != 0), x.masked_select(y != 0) / (1 - p)));
  }
}

TEST_F(DropoutTest, EvalModeAndZeroProbabilityAreTheIdentity) {
  const at::Tensor x = at::randn({16, 16});
  layers::Dropout dropout(ctx().child("drop"), 0.3);
  dropout.eval();
  EXPECT_TRUE(at::equal(dropout.forward(x), x));
  layers::Dropout none(ctx().child("none"), 0.0);
  none.train();
  EXPECT_TRUE(at::equal(none.forward(x), x));
}

TEST_F(DropoutTest, ProbabilitiesOutsideZeroToOneAreRefusedNamingTheModule) {
  for (const double p : {-0.1, 1.0, 1.5, std::nan("")}) {
    try {
      layers::Dropout dropout(ctx().child("h").child(3).child("attn_dropout"), p);
      ADD_FAILURE() << "p = " << p << " was accepted";
    } catch (const ModelError& e) {
      EXPECT_NE(std::string(e.what()).find("h.3.attn_dropout: dropout probability"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST_F(DropoutTest, SavedStreamStatesReplayTheSameMasks) {
  auto root = std::make_shared<torch::nn::Module>();
  auto a = root->register_module("a", std::make_shared<layers::Dropout>(ctx().child("a"), 0.4));
  auto b = root->register_module(
      "b", std::make_shared<layers::Dropout>(
               ctx().child("b"), 0.4,
               layers::DropoutSlices{.dim = 0, .total = 3, .first = 0, .count = 3}));
  root->train();
  const at::Tensor x = at::ones({3, 32});
  a->forward(x);  // advance the streams
  const auto saved = layers::dropout_rng_states(*root);
  ASSERT_EQ(saved.size(), 2u);
  const at::Tensor first_a = a->forward(x), first_b = b->forward(x);
  EXPECT_FALSE(at::equal(first_a, a->forward(x))) << "the stream did not advance";
  layers::set_dropout_rng_states(*root, saved);
  EXPECT_TRUE(at::equal(a->forward(x), first_a));
  EXPECT_TRUE(at::equal(b->forward(x), first_b));
  EXPECT_THROW(layers::set_dropout_rng_states(*root, {{"a", saved.at("a")}}), Error);
  EXPECT_THROW(a->set_rng_state(saved.at("b")), Error);
}

// Stochastic depth drops whole samples: each sample's branch is zero or divided by 1 - p (HF's
// x.div(keep) bit for bit), at a rate within statistical bounds; the identity in eval; the same
// samples for a module of the same path (every tensor-parallel rank), its stream saved and
// restored with the dropouts'; HF's rates rising linearly from the first layer's 0.
TEST_F(DropoutTest, DropPathDropsWholeSamples) {
  constexpr int64_t n = 1 << 14;
  constexpr double p = 0.3;
  layers::DropPath drop_path(ctx().child("drop_path"), p);
  drop_path.train();
  const at::Tensor x = at::rand({n, 3, 5}) + 0.5;  // no zero in it
  const at::Tensor y = drop_path.forward(x);
  const at::Tensor dropped = (y == 0).all(-1).all(-1);  // [n]
  const at::Tensor kept = (y != 0).all(-1).all(-1);
  EXPECT_TRUE(at::logical_or(dropped, kept).all().item<bool>()) << "a sample dropped in part";
  EXPECT_NEAR(dropped.to(at::kDouble).mean().item<double>(), p, 5 * std::sqrt(p * (1 - p) / n));
  EXPECT_TRUE(at::equal(y.index({kept}), x.div(1 - p).index({kept})));
  // Another module of the same path draws the same samples; a saved stream replays them.
  const auto same = std::make_shared<layers::DropPath>(ctx().child("drop_path"), p);
  same->train();
  const auto states = layers::dropout_rng_states(*same);
  EXPECT_TRUE(at::equal(same->forward(x), y));
  layers::set_dropout_rng_states(*same, states);
  EXPECT_TRUE(at::equal(same->forward(x), y));
  drop_path.eval();
  EXPECT_TRUE(at::equal(drop_path.forward(x), x));
  EXPECT_EQ(layers::drop_path_rate(0.6, 0, 5), 0.0);
  EXPECT_DOUBLE_EQ(layers::drop_path_rate(0.6, 2, 5), 0.3);
  EXPECT_DOUBLE_EQ(layers::drop_path_rate(0.6, 4, 5), 0.6);
  EXPECT_EQ(layers::drop_path_rate(0.6, 0, 1), 0.0);
}

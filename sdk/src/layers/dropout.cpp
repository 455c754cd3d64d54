// Dropout with per-module (and per-slice) random streams that do not depend on the
// tensor-parallel layout, and saving / restoring their states.
#include "shardformer/layers/dropout.h"

#include "shardformer/error.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

namespace shardformer::layers {
namespace {

// FNV-1a, so that a module's stream is the same in every build and on every platform.
uint64_t stable_hash(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// splitmix64's finaliser: distinct inputs give unrelated seeds.
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a + 0x9e3779b97f4a7c15ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

at::Generator stream(const BuildContext& ctx, uint64_t slice) {
  const ParallelContext* parallel = ctx.parallel();
  const uint64_t seed = parallel ? parallel->config.seed : ShardConfig{}.seed;
  const uint64_t dp_rank = parallel ? static_cast<uint64_t>(parallel->dp_rank()) : 0;
  at::Generator generator = at::globalContext().defaultGenerator(ctx.device()).clone();
  generator.set_current_seed(mix(mix(mix(seed, stable_hash(ctx.path())), dp_rank), slice));
  return generator;
}

void check_probability(const BuildContext& ctx, double p) {
  if (!(p >= 0.0 && p < 1.0)) {
    throw ModelError(str(ctx.path(), ": dropout probability ", p, " is not in [0, 1)"));
  }
}

}  // namespace

Dropout::Dropout(const BuildContext& ctx, double p) : path_(ctx.path()), p_(p) {
  check_probability(ctx, p);
  streams_.push_back(stream(ctx, 0));
}

Dropout::Dropout(const BuildContext& ctx, double p, DropoutSlices slices)
    : path_(ctx.path()), p_(p), slices_(slices) {
  check_probability(ctx, p);
  if (slices.count < 1 || slices.first < 0 || slices.first + slices.count > slices.total) {
    throw ModelError(str(ctx.path(), ": dropout slices [", slices.first, ", ",
                         slices.first + slices.count, ") outside 0..", slices.total));
  }
  for (int64_t i = 0; i < slices.count; ++i) {
    streams_.push_back(stream(ctx, static_cast<uint64_t>(slices.first + i) + 1));
  }
}

at::Tensor Dropout::forward(const at::Tensor& input, const SequenceSplit* sequence) {
  if (!active() || sequence == nullptr) return forward(input);
  if (slices_) throw Error(str(path_, ": a sliced dropout cannot take a sequence split"));
  auto shape = input.sizes().vec();  // [batch, seq, ...]: the whole sequence's mask
  shape[1] = sequence->length();
  const at::Tensor keep = at::empty(shape, input.options()).bernoulli_(1.0 - p_, streams_[0]);
  return input * sequence->local(keep) / (1.0 - p_);
}

at::Tensor Dropout::forward(const at::Tensor& input, int64_t first_slice) {
  if (!active()) return input;
  at::Tensor keep;
  if (!slices_) {
    keep = at::empty_like(input, at::MemoryFormat::Contiguous).bernoulli_(1.0 - p_, streams_[0]);
  } else {
    const int64_t dim = slices_->dim < 0 ? slices_->dim + input.dim() : slices_->dim;
    if (first_slice < 0 || first_slice + input.size(dim) > slices_->count) {
      throw Error(str(path_, ": dropout input has slices ", first_slice, "..",
                      first_slice + input.size(dim), " along dim ", dim, " of this rank's ",
                      slices_->count));
    }
    // [slices, ...rest]: each slice contiguous, drawn from its own stream.
    keep = at::empty(input.movedim(dim, 0).sizes(), input.options());
    for (int64_t i = 0; i < input.size(dim); ++i) {
      keep[i].bernoulli_(1.0 - p_, streams_[static_cast<size_t>(first_slice + i)]);
    }
    keep = keep.movedim(0, dim);
  }
  return input * keep / (1.0 - p_);
}

at::Tensor Dropout::rng_state() const {
  std::vector<at::Tensor> states;
  for (const at::Generator& g : streams_) states.push_back(g.get_state());
  return at::stack(states);
}

void Dropout::set_rng_state(const at::Tensor& state) {
  const at::Tensor expected = rng_state();
  if (state.sizes() != expected.sizes() || state.scalar_type() != expected.scalar_type()) {
    throw Error(str(path_, ": dropout RNG state of shape ", shape_str(state.sizes().vec()),
                    ", expected ", shape_str(expected.sizes().vec())));
  }
  for (size_t i = 0; i < streams_.size(); ++i) {
    streams_[i].set_state(state[static_cast<int64_t>(i)].clone());
  }
}

std::map<std::string, at::Tensor> dropout_rng_states(const torch::nn::Module& root) {
  std::map<std::string, at::Tensor> states;
  for (const auto& item : root.named_modules()) {
    if (const auto* dropout = dynamic_cast<const Dropout*>(item.value().get())) {
      states[item.key()] = dropout->rng_state();
    }
  }
  return states;
}

void set_dropout_rng_states(torch::nn::Module& root,
                            const std::map<std::string, at::Tensor>& states) {
  for (const auto& item : root.named_modules()) {
    if (auto* dropout = dynamic_cast<Dropout*>(item.value().get())) {
      const auto it = states.find(item.key());
      if (it == states.end()) {
        throw Error(str("no saved dropout RNG state for module '", item.key(), "'"));
      }
      dropout->set_rng_state(it->second);
    }
  }
}

}  // namespace shardformer::layers

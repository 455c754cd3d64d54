// Masks, ALiBi, grouped-query attention over the KV cache, with SDPA or explicit scores.
#include "shardformer/layers/attention.h"

#include "inference_kernels.h"

#include "shardformer/distributed/comm_ops.h"
#include "shardformer/distributed/process_group.h"
#include "shardformer/error.h"
#include "shardformer/layers/dropout.h"
#include "shardformer/layers/ring_attention.h"
#include "shardformer/strings.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <optional>

namespace shardformer::layers {

at::Tensor attention_mask(const MaskOptions& options, const at::Tensor& padding, int64_t batch,
                          int64_t q_len, int64_t past, c10::Device device) {
  const bool plain = !options.causal || (q_len == 1 && options.sliding_window <= 0);
  if (!padding.defined() && plain) return {};
  const int64_t kv_len = past + q_len;
  const auto index = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor q_pos = at::arange(past, kv_len, index).view({q_len, 1});  // [q_len, 1]
  const at::Tensor k_pos = at::arange(kv_len, index).view({1, kv_len});       // [1, kv_len]
  at::Tensor mask = at::ones({q_len, kv_len}, index.dtype(at::kBool));
  if (options.causal) mask = k_pos <= q_pos;
  if (options.sliding_window > 0) mask = mask & (k_pos > q_pos - options.sliding_window);
  mask = mask.view({1, 1, q_len, kv_len});
  if (padding.defined()) {
    mask = mask & padding.to(device).to(at::kBool).view({batch, 1, 1, kv_len});
  }
  return mask.expand({batch, 1, q_len, kv_len});  // [batch, 1, q_len, kv_len]
}

at::Tensor alibi_slopes(int64_t num_heads) {
  const auto power = static_cast<int64_t>(std::pow(2.0, std::floor(std::log2(num_heads))));
  const auto slopes_of = [](int64_t p, int64_t count, int64_t step) {
    std::vector<double> slopes;
    const double base = std::pow(2.0, -std::pow(2.0, -(std::log2(p) - 3)));
    for (int64_t i = 1; slopes.size() < static_cast<size_t>(count); i += step) {
      slopes.push_back(std::pow(base, static_cast<double>(i)));
    }
    return slopes;
  };
  std::vector<double> slopes = slopes_of(power, power, 1);
  if (power < num_heads) {  // the odd powers of the next power of two's base
    const std::vector<double> extra = slopes_of(2 * power, num_heads - power, 2);
    slopes.insert(slopes.end(), extra.begin(), extra.end());
  }
  return at::tensor(slopes, at::kDouble).to(at::kFloat);  // [num_heads]
}

at::Tensor alibi_bias(const at::Tensor& slopes, int64_t first, int64_t count,
                      const at::Tensor& padding, c10::ScalarType dtype) {
  const at::Tensor real = padding.to(at::kLong);                                 // [batch, kv]
  const at::Tensor positions = ((real.cumsum(-1) - 1) * real).to(at::kFloat);    // [batch, kv]
  const at::Tensor local = slopes.narrow(0, first, count).to(padding.device());  // [count]
  return (local.view({1, count, 1, 1}) * positions.unsqueeze(1).unsqueeze(1)).to(dtype);
}

at::Tensor split_heads(const at::Tensor& x, int64_t heads, int64_t head_dim) {
  return x.view({x.size(0), x.size(1), heads, head_dim}).transpose(1, 2);
}

namespace {

// [batch, kv_heads, kv, d] -> [batch, kv_heads * groups, kv, d], each head repeated in place
at::Tensor repeat_kv(const at::Tensor& x, int64_t groups) {
  return groups == 1 ? x : x.repeat_interleave(groups, 1);
}

// What a boolean mask [batch, 1, q, kv] allows: the plain causal pattern (key j seen by query i
// iff j <= i, no padding), every key (padding that pads nothing), or for every query of batch b
// the keys 0 .. key_counts[b] - 1 (right padding of an encoder's batch). SDPA given a boolean
// mask converts it to an fp32 one in every call and keeps that for backward (16 MiB per layer at
// 2048 tokens, found by the sequence-parallel memory benchmark); is_causal keeps nothing, and
// each pattern can take block_attention. Every layer of a forward pass shares one mask tensor,
// so the answer is kept for the last mask seen, by a weak reference (the mask is not kept alive).
struct MaskPattern {
  bool causal = false, all_visible = false;
  at::Tensor key_counts;  // int64 [batch] for right padding; undefined otherwise
};

// Batch b's visible keys per query, where every query of b sees the same keys 0 .. n_b - 1;
// undefined for any other mask.
at::Tensor right_padding_counts(const at::Tensor& mask) {
  const at::Tensor first = mask.select(2, 0);  // [batch, 1, kv]: the first query's keys
  if (!at::equal(mask, first.unsqueeze(2).expand_as(mask))) return {};
  const at::Tensor counts = first.sum(-1, /*keepdim=*/false, at::kLong).view({-1});  // [batch]
  const at::Tensor prefix =
      at::arange(mask.size(-1), counts.options()).unsqueeze(0) < counts.unsqueeze(1);
  return at::equal(first.squeeze(1), prefix) ? counts.contiguous() : at::Tensor();
}

MaskPattern mask_pattern(const at::Tensor& mask) {
  using WeakImpl = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>;
  thread_local WeakImpl last{c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  thread_local MaskPattern pattern;
  if (last.lock().get() == mask.unsafeGetTensorImpl()) return pattern;
  const int64_t n = mask.size(-1);
  const bool boolean = mask.dim() == 4 && mask.scalar_type() == at::kBool;
  pattern.causal = boolean && mask.size(-2) == n &&
                   at::equal(mask, at::ones({n, n}, mask.options()).tril().expand_as(mask));
  // The kernel-only patterns are looked for on CPU masks alone: on a GPU each check would wait
  // for the device.
  const bool cpu = mask.device().is_cpu();
  pattern.all_visible = boolean && cpu && !pattern.causal && mask.all().item<bool>();
  pattern.key_counts = boolean && cpu && mask.size(1) == 1 && !pattern.causal &&
                               !pattern.all_visible && mask.size(-2) > 0
                           ? right_padding_counts(mask)
                           : at::Tensor();
  last = WeakImpl(mask.getIntrusivePtr());
  return pattern;
}

// Queries of a decoding step at most (a prompt of a few tokens counts as one): over a KV cache
// they take cached_attention, which reads the keys in place.
constexpr int64_t kDecodingQueries = 8;

// first_head: the first of this rank's heads that q holds (Ulysses holds a share of them).
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const AttentionArgs& args, int64_t first_head = 0) {
  const bool explicit_scores = args.dropout != nullptr && args.dropout->active();
  const bool causal = !args.mask.defined() && args.causal && q.size(2) == k.size(2);
  if (!explicit_scores && !args.bias.defined()) {
    const MaskPattern pattern = args.mask.defined() ? mask_pattern(args.mask) : MaskPattern{};
    if (causal || (q.size(2) == k.size(2) && pattern.causal)) {
      // Inference: the kernel on whichever GEMM runs the products (GPT-2-small's 4 x 512
      // tokens on an Intel Xeon: 12.5 ms a layer against SDPA's 25, bench/kernel_speed).
      if (use_inference_kernel({}) && kernels::block_attention_applies(q, k, v)) {
        return kernels::block_attention(q, k, v, args.scale, /*causal=*/true);
      }
      return at::scaled_dot_product_attention(q, k, v, {}, /*dropout_p=*/0.0,
                                              /*is_causal=*/true, args.scale);
    }
    // Every key seen (ViT, an encoder without padding or with padding that pads nothing): the
    // same kernel for more queries than a decoding step's, which would pay for packing every key
    // for a few dot products each.
    if ((!args.mask.defined() || pattern.all_visible) && q.size(2) > kDecodingQueries &&
        use_inference_kernel({}) && kernels::block_attention_applies(q, k, v)) {
      return kernels::block_attention(q, k, v, args.scale, /*causal=*/false);
    }
    // Right padding (an encoder's batch of texts): each batch's unpadded keys.
    if (pattern.key_counts.defined() && pattern.key_counts.size(0) == q.size(0) &&
        q.size(2) > kDecodingQueries && use_inference_kernel({}) &&
        kernels::block_attention_applies(q, k, v)) {
      return kernels::block_attention(q, k, v, args.scale, /*causal=*/false, pattern.key_counts);
    }
    // No mask (a decoding step of unpadded prompts) goes as none: SDPA refuses an undefined one.
    const std::optional<at::Tensor> mask =
        args.mask.defined() ? std::optional<at::Tensor>(args.mask) : std::nullopt;
    return at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0,
                                            /*is_causal=*/false, args.scale);
  }
  if (!explicit_scores && !args.mask.defined() && !args.causal) {
    // A bias alone (BEiT's and Swin's relative positions, T5's encoder without padding): SDPA adds
    // it as a float mask without materialising the scores (Swin-T's window attention: 2.5-3x the
    // explicit path's speed, results within 3e-6).
    return at::scaled_dot_product_attention(q, k, v, args.bias.to(q.scalar_type()),
                                            /*dropout_p=*/0.0, /*is_causal=*/false, args.scale);
  }
  // Explicit scores: HF's eager attention (ALiBi, or dropout drawn from our own streams).
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * args.scale;  // [b, h, q, kv]
  if (args.bias.defined()) scores = scores + args.bias;
  const at::Tensor mask =  // [.., q, kv]; plain causal: made here, for this layer only
      causal ? at::ones({q.size(2), k.size(2)}, q.options().dtype(at::kBool)).tril() : args.mask;
  if (mask.defined()) {
    // ALiBi masks with the dtype's lowest finite value, as HF does, so a fully masked row
    // (padding) softmaxes to a uniform row rather than NaN.
    double lowest = -std::numeric_limits<double>::infinity();
    if (args.bias.defined()) {
      AT_DISPATCH_FLOATING_TYPES_AND2(
          at::kHalf, at::kBFloat16, scores.scalar_type(), "lowest",
          [&] { lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
    }
    scores = scores.masked_fill(mask.logical_not(), lowest);
  }
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  if (mask.defined() && !args.bias.defined()) {
    probs = probs.masked_fill(mask.logical_not(), 0.0);  // fully masked rows: 0, not NaN
  }
  if (args.dropout != nullptr) probs = args.dropout->forward(probs, first_head);
  return at::matmul(probs, v);  // [b, h, q, head_dim]
}

// Whether a decoding step's few queries take kernels::cached_attention, which reads the cache's
// KV heads in place (no repeated keys, no SDPA call): inference on fp32 CPU tensors, softmax
// attention without ALiBi or dropout.
bool decoding_kernel(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                     const AttentionArgs& args) {
  return args.cache != nullptr && q.size(2) <= kDecodingQueries && !args.bias.defined() &&
         (args.dropout == nullptr || !args.dropout->active()) && use_inference_kernel({}) &&
         kernels::cached_attention_applies(q, keys, values, args.mask);
}

// DeepSpeed-Ulysses: q [b, heads, seq/sp, d] -> [b, heads/sp, seq, d] by all-to-all (k, v too),
// attention over the whole sequence, and back -> [b, heads, seq/sp, d].
at::Tensor ulysses(const at::Tensor& q, at::Tensor k, at::Tensor v, const AttentionArgs& args) {
  const distributed::ProcessGroup& group = args.sequence->group();
  const int64_t size = group.size(), heads = q.size(1);
  if (heads % size != 0) {
    throw ModelError(str("all_to_all sequence parallelism: this rank's ", heads,
                         " attention heads do not divide by sp_size = ", size));
  }
  if (k.size(1) % size != 0) {  // fewer key / value heads than ranks: share them out whole
    k = repeat_kv(k, heads / k.size(1));
    v = repeat_kv(v, heads / v.size(1));
  }
  const auto scatter_heads = [&](const at::Tensor& t) {
    return distributed::all_to_all(t, group, /*scatter_dim=*/1, /*gather_dim=*/2);
  };
  const at::Tensor keys = scatter_heads(k), values = scatter_heads(v);
  const at::Tensor out = attend(scatter_heads(q), repeat_kv(keys, heads / k.size(1)),
                                repeat_kv(values, heads / v.size(1)), args,
                                group.rank() * (heads / size));  // [b, heads/sp, seq, d]
  return distributed::all_to_all(out, group, /*scatter_dim=*/2, /*gather_dim=*/1);
}

at::Tensor ring(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                const AttentionArgs& args) {
  if (args.bias.defined()) throw ModelError("ring attention does not support ALiBi biases");
  if (args.dropout != nullptr && args.dropout->active()) {
    throw ModelError(
        "ring attention does not support attention-probability dropout in training; set the "
        "model's attention dropout to 0 or use sequence_parallelism_mode = \"all_to_all\"");
  }
  return ring_attention(q, k, v, args.scale, *args.sequence);
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const AttentionArgs& args) {
  if (args.sequence != nullptr && args.sequence->mode() != SequenceParallelMode::kSplitGather) {
    if (args.upcast && q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble) {
      throw ModelError("reorder_and_upcast_attn is not supported under sequence parallelism");
    }
    const at::Tensor out = args.sequence->mode() == SequenceParallelMode::kAllToAll
                               ? ulysses(q, k, v, args)
                               : ring(q, k, v, args);  // [b, heads, seq/sp, d]
    return out.transpose(1, 2).reshape({q.size(0), q.size(2), -1});
  }
  at::Tensor keys = k, values = v;
  if (args.cache != nullptr) std::tie(keys, values) = args.cache->append(args.layer, k, v);
  if (decoding_kernel(q, keys, values, args)) {
    // Without a mask a causal step's queries are the cache's last positions (a prompt's).
    return kernels::cached_attention(q, keys, values, args.mask, args.scale,
                                     !args.mask.defined() && args.causal);  // [b, q, h * d]
  }
  const int64_t groups = q.size(1) / keys.size(1);
  keys = repeat_kv(keys, groups);
  values = repeat_kv(values, groups);
  at::Tensor out;  // [batch, heads, q_len, head_dim]
  const bool upcast =
      args.upcast && q.scalar_type() != at::kFloat && q.scalar_type() != at::kDouble;
  if (upcast) {
    AttentionArgs wide = args;
    if (wide.bias.defined()) wide.bias = wide.bias.to(at::kFloat);
    out = attend(q.to(at::kFloat), keys.to(at::kFloat), values.to(at::kFloat), wide)
              .to(q.scalar_type());
  } else {
    out = attend(q, keys, values, args);
  }
  return out.transpose(1, 2).reshape({q.size(0), q.size(2), -1});  // [batch, q_len, heads * d]
}

}  // namespace shardformer::layers

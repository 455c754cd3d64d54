// Micro-benchmark of the CPU kernels (kernels/): kernels::gemm's GFLOP/s (the library this
// machine picks or SHARDFORMER_CPU_GEMM names) against this machine's FMA peak and ATen's GEMM,
// each fused kernel's GB/s against the memory read bandwidth, all measured in the same run. Prints
// markdown tables (docs/benchmarks.md); --limits prints the GEMM and FMA rates as one JSON line for
// bench/bench_speed.py; --gemm M,K,N[,t] ... times kernels::gemm alone on those shapes, one JSON
// line each, then the FMA peak (with no shape, the peak alone: bench/gemm_libraries.py's roofline);
// --attention prints the attention kernels' table alone; --decode-step times a decoding step's
// products alone at SmolLM2-135M's shapes against the memory read rate; --few-rows times a
// prompt's few-row products against the library GEMM and the FMA peak, naming the CPU; --amx
// times inference's products on AMX tiles (amx_gemm.h, weights packed once) against ATen's (MKL)
// on GPT-2's shapes.
#include "fma_peak.h"
#include "shardformer/kernels/amx_gemm.h"
#include "shardformer/kernels/cpu_kernels.h"
#include "shardformer/kernels/skinny_prefetch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <malloc.h>
#include <unistd.h>

using namespace shardformer;

namespace {

// The best of `repeats` timings of `run`, in seconds (one untimed call first).
double best_seconds(const std::function<void()>& run, int repeats = 7) {
  run();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// The last-level cache's size as glibc reads it from the CPU (64 MiB where it cannot say).
int64_t last_level_cache_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? l3 : int64_t{64} << 20;
}

double gemm_flops(const at::Tensor& a, const at::Tensor& b) {
  return 2.0 * static_cast<double>(a.size(0)) * static_cast<double>(a.size(1)) *
         static_cast<double>(b.size(1));
}

// kernels::gemm and ATen's, each into an output made once (as the host's block cache gives
// back): fresh 412 MB outputs would time page faults and zeroing instead of the products.
void gemm_row(const char* name, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
              double peak) {
  const double flops = gemm_flops(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(1)});
  const double ours = best_seconds([&] { kernels::gemm(a, b, bias, false, out); }, 5);
  const double aten = best_seconds(
      [&] {
        if (bias.defined())
          at::addmm_out(out, bias, a, b);
        else
          at::mm_out(out, a, b);
      },
      5);
  std::printf("| %s | %.2f | %.2f | %.0f | %.0f%% | %.0f | %.2f x |\n", name, ours * 1e3,
              aten * 1e3, flops / ours / 1e9, 100.0 * flops / ours / 1e9 / peak, flops / aten / 1e9,
              aten / ours);
}

// A --gemm shape: a [m, k] . b [k, n], b stored as [n, k] and read transposed when `bt` (",t").
struct GemmShape {
  long long m, k, n;  // long long for sscanf's and printf's %lld
  bool bt;
};

std::optional<GemmShape> parse_gemm_shape(const std::string& arg) {
  GemmShape s{0, 0, 0, false};
  int used = 0;
  if (std::sscanf(arg.c_str(), "%lld,%lld,%lld%n", &s.m, &s.k, &s.n, &used) != 3 || s.m <= 0 ||
      s.k <= 0 || s.n <= 0)
    return std::nullopt;
  const std::string rest = arg.substr(static_cast<size_t>(used));
  if (!rest.empty() && rest != ",t") return std::nullopt;
  s.bt = rest == ",t";
  return s;
}

void row(const char* name, double bytes, double ours, double aten, double bandwidth) {
  std::printf("| %s | %.2f | %.2f | %.1f | %.0f%% | %.2f x |\n", name, ours * 1e3, aten * 1e3,
              bytes / ours / 1e9, 100.0 * bytes / ours / bandwidth, aten / ours);
}

// block_attention against SDPA on the q / k / v of a fused projection's output qkv
// [batch, tokens, 3, heads, dim], each a strided view [batch, heads, tokens, dim]; a table row.
void block_attention_row(const char* name, const at::Tensor& qkv, bool causal) {
  const at::Tensor q = qkv.select(2, 0).transpose(1, 2);
  const at::Tensor k = qkv.select(2, 1).transpose(1, 2);
  const at::Tensor v = qkv.select(2, 2).transpose(1, 2);
  const double ours = best_seconds([&] { kernels::block_attention(q, k, v, 0.125, causal); }, 5);
  const double sdpa =
      best_seconds([&] { at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal, 0.125); }, 5);
  std::printf("| %s: block_attention against SDPA | %.3f | %.3f | %.2f |\n", name, ours * 1e3,
              sdpa * 1e3, sdpa / ours);
}

// The attention kernels against ATen's: a decoding step's cached attention, a forward's causal
// attention and an encoder's attention over every key; a markdown table.
void attention_rows() {
  // A 4 MiB block allocated and freed first lifts glibc's mmap threshold past the baselines'
  // per-call copies (1.2 MB by repeat_interleave), as the rest of a full run does: run alone,
  // each copy was a fresh mapping and its page faults made the SDPA baseline 7x slower.
  (void)at::empty({int64_t{1} << 20});
  // A decoding step's attention in SmolLM2-135M (30 layers, 9 query heads over 3 KV heads of 64)
  // over a 512-token cache, against repeated KV heads and SDPA.
  std::printf(
      "\n| a decoding step's piece, SmolLM2-135M x 30 layers | ours ms | before ms | before / ours"
      " |\n|---|---|---|---|\n");
  const at::Tensor q1 = at::randn({1, 1, 9, 64}).transpose(1, 2);  // [1, 9, 1, 64]
  const at::Tensor cache_k = at::randn({1, 3, 1024, 64}).narrow(2, 0, 512);
  const at::Tensor cache_v = at::randn({1, 3, 1024, 64}).narrow(2, 0, 512);
  const double cached = best_seconds([&] {
    for (int i = 0; i < 30; ++i) kernels::cached_attention(q1, cache_k, cache_v, {}, 0.125);
  });
  const double sdpa = best_seconds([&] {
    for (int i = 0; i < 30; ++i) {
      at::scaled_dot_product_attention(q1, cache_k.repeat_interleave(3, 1),
                                       cache_v.repeat_interleave(3, 1), {}, 0.0, false, 0.125)
          .transpose(1, 2)
          .reshape({1, 1, -1});
    }
  });
  std::printf(
      "| attention, 1 query over 512 cached keys: cached_attention against repeat_interleave +"
      " SDPA | %.3f | %.3f | %.2f |\n",
      cached * 1e3, sdpa * 1e3, sdpa / cached);

  // A forward's causal attention in GPT-2 small (4 x 512 tokens, 12 heads of 64), q / k / v
  // strided views of the fused projection as the model hands them over, against SDPA (ATen's
  // CPU flash attention); an encoder's attention over every key: ViT-base at batch 32 (197
  // tokens, 12 heads of 64).
  block_attention_row("a forward's causal attention, 4 x 12 heads x 512 tokens x 64",
                      at::randn({4, 512, 3, 12, 64}), /*causal=*/true);
  block_attention_row("an encoder's attention, 32 x 12 heads x 197 tokens x 64 (ViT-base)",
                      at::randn({32, 197, 3, 12, 64}), /*causal=*/false);
}

// A decoding step's products alone, at SmolLM2-135M's shapes (30 layers of q / k / v in one
// pass, o, the gated MLP in one pass, down; the tied 49152-row head): random weights, 538 MB,
// read once per step as the model reads them, against the memory's read rate in the same run.
// One JSON line: how near the products alone come to the bandwidth, without the rest of a step.
void decode_step_row(int threads) {
  struct Layer {
    at::Tensor q, k, v, o, gate, up, down;
  };
  std::vector<Layer> layers;
  double bytes = 0;
  for (int i = 0; i < 30; ++i) {
    layers.push_back({at::randn({576, 576}), at::randn({192, 576}), at::randn({192, 576}),
                      at::randn({576, 576}), at::randn({1536, 576}), at::randn({1536, 576}),
                      at::randn({576, 1536})});
    for (const at::Tensor& w : {layers.back().q, layers.back().k, layers.back().v, layers.back().o,
                                layers.back().gate, layers.back().up, layers.back().down})
      bytes += static_cast<double>(w.nbytes());
  }
  const at::Tensor head = at::randn({49152, 576});
  bytes += static_cast<double>(head.nbytes());
  const at::Tensor x = at::randn({1, 576});
  const double step = best_seconds(
      [&] {
        for (const Layer& l : layers) {
          (void)kernels::skinny_products(x, {l.q, l.k, l.v}, {{}, {}, {}});
          (void)kernels::skinny_linear(x, l.o, {}, false);
          const at::Tensor h = kernels::skinny_silu_gate(x, l.gate, {}, l.up, {});
          (void)kernels::skinny_linear(h, l.down, {}, false);
        }
        (void)kernels::skinny_linear(x, head, {}, false);
      },
      9);
  const at::Tensor big = at::ones({int64_t{1} << 28});  // 1 GiB of fp32, summed: memory read
  const double read_gbs = big.nbytes() / best_seconds([&] { (void)big.sum(); }, 5) / 1e9;
  std::printf(
      "{\"kind\": \"decode_step\", \"threads\": %d, \"kernels\": \"%s\", \"bytes\": %.0f, "
      "\"seconds\": %.6g, \"gbs\": %.1f, \"read_gbs\": %.1f, \"prefetch\": \"%s\"}\n",
      threads, kernels::capability().c_str(), bytes, step, bytes / step / 1e9, read_gbs,
      kernels::skinny_prefetch_summary().c_str());
}

// "AMD EPYC (AuthenticAMD, family 25 model 1)": /proc/cpuinfo's first processor, so that a
// table names the machine it was measured on.
std::string cpu_model() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "unknown CPU";
  std::string name, vendor, family, model;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    const std::string text(line);
    const size_t colon = text.find(':');
    if (colon == std::string::npos) {
      if (!name.empty()) break;  // the first processor's block ended
      continue;
    }
    std::string key = text.substr(0, colon), value = text.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(' '));
    value.erase(value.find_last_not_of("\n") + 1);
    if (key == "model name" && name.empty()) name = value;
    if (key == "vendor_id" && vendor.empty()) vendor = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "model" && model.empty()) model = value;
  }
  std::fclose(f);
  return (name.empty() ? std::string("unknown CPU") : name) + " (" + vendor + ", family " + family +
         " model " + model + ")";
}

// A short prompt's products (prefill): up to kSkinnyRows rows take the skinny product (more
// than 8 rows in register tiles that read each weight once), the library GEMM packs first. Weights
// streamed from memory, as in a model larger than the caches: each call takes the next of
// copies that together are twice the last-level cache (at least 96; a Xeon here has 480 MiB of
// L3, which held 96 of 3.5 MB and made "from memory" read from L3). SmolLM2's gate_proj and
// down_proj; the rate against the FMA peak measured in the same run.
void few_rows_table(double peak) {
  std::printf("cpu: %s; kernels %s; fp32 FMA peak %.0f GFLOP/s (%s) on %d threads\n",
              cpu_model().c_str(), kernels::capability().c_str(), peak, fma_peak_isa(),
              at::get_num_threads());
  std::printf(
      "\n| few rows, weights from memory | skinny ms | GFLOP/s | of FMA peak | GEMM (%s) ms | "
      "skinny / GEMM time |\n|---|---|---|---|---|---|\n",
      kernels::gemm_name().c_str());
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1536, 576}, {576, 1536}}) {
    const at::Tensor weight = at::randn({n, k});
    const int64_t copies =
        std::max<int64_t>(96, 2 * last_level_cache_bytes() / weight.nbytes() + 1);
    std::vector<at::Tensor> weights;
    for (int64_t i = 0; i < copies; ++i) weights.push_back(weight.clone());
    for (const int64_t rows : {8, 16, 24, 32}) {
      const at::Tensor x = at::randn({rows, k});
      const double skinny = best_seconds([&] {
        for (const at::Tensor& w : weights) kernels::skinny_linear(x, w, {}, false);
      });
      const double library = best_seconds([&] {
        for (const at::Tensor& w : weights) kernels::linear(x, w, {}, false);
      });
      const double calls = static_cast<double>(copies);
      const double gflops = 2.0 * static_cast<double>(rows * n * k) * calls / skinny / 1e9;
      std::printf(
          "| %lld x %lld . [%lld, %lld]^T, %lld copies | %.3f | %.1f | %.0f%% | %.3f | %.2f |\n",
          static_cast<long long>(rows), static_cast<long long>(k), static_cast<long long>(n),
          static_cast<long long>(k), static_cast<long long>(copies), skinny * 1e3 / calls, gflops,
          100.0 * gflops / peak, library * 1e3 / calls, skinny / library);
    }
  }
  std::printf("\n");
}

// The AMX products (weights packed once) against ATen's, on GPT-2-small's products at 4 x 512
// tokens; a markdown table. b is [k, n], or a transposed view of a contiguous [n, k].
void amx_row(const char* name, const at::Tensor& a, const at::Tensor& b, const at::Tensor& bias,
             double peak) {
  const bool k_major = b.is_contiguous();
  const at::Tensor stored = k_major ? b : b.t();
  const double pack = best_seconds([&] { (void)kernels::amx_pack_weight(stored, k_major); }, 3);
  const at::Tensor packed = kernels::amx_pack_weight(stored, k_major);
  const double flops = gemm_flops(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(1)});
  const double amx =
      best_seconds([&] { (void)kernels::amx_linear(a, packed, b.size(1), bias); }, 5);
  const double aten = best_seconds(
      [&] { bias.defined() ? at::addmm_out(out, bias, a, b) : at::mm_out(out, a, b); }, 5);
  std::printf("| %s | %.2f | %.2f | %.0f | %.0f%% | %.0f | %.2f x | %.2f |\n", name, amx * 1e3,
              aten * 1e3, flops / amx / 1e9, 100.0 * flops / amx / 1e9 / peak, flops / aten / 1e9,
              aten / amx, pack * 1e3);
}

void amx_rows(int threads, double peak) {
  std::printf(
      "threads %d, fp32 FMA peak %.0f GFLOP/s (%s); AMX products (bf16x6) against "
      "ATen's (%s)\n\n",
      threads, peak, fma_peak_isa(), kernels::gemm_name().c_str());
  std::printf(
      "| product | AMX ms | ATen ms | AMX GFLOP/s | of FMA peak | ATen GFLOP/s | "
      "ATen / AMX time | packing the weight ms |\n|---|---|---|---|---|---|---|---|\n");
  const at::Tensor sq = at::randn({2048, 2048});
  amx_row("[2048, 2048] . [2048, 2048]", sq, sq, {}, peak);
  const at::Tensor x = at::randn({2048, 768}), x4 = at::randn({2048, 3072});
  amx_row("c_attn [2048, 768] . [768, 2304] + bias", x, at::randn({768, 2304}), at::randn({2304}),
          peak);
  amx_row("attn c_proj [2048, 768] . [768, 768] + bias", x, at::randn({768, 768}), at::randn({768}),
          peak);
  amx_row("c_fc [2048, 768] . [768, 3072] + bias", x, at::randn({768, 3072}), at::randn({3072}),
          peak);
  amx_row("mlp c_proj [2048, 3072] . [3072, 768] + bias", x4, at::randn({3072, 768}),
          at::randn({768}), peak);
  amx_row("LM head [2048, 768] . [50257, 768]^T", x, at::randn({50257, 768}).t(), {}, peak);
  amx_row("64 rows: 64 x 768 . [768, 2304] + bias", at::randn({64, 768}), at::randn({768, 2304}),
          at::randn({2304}), peak);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  bool limits = false, gemm_only = false, attention_only = false, decode_step = false,
       few_rows = false, amx = false;
  std::vector<GemmShape> gemm_shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--limits") {
      limits = true;
    } else if (arg == "--attention") {
      attention_only = true;
    } else if (arg == "--decode-step") {
      decode_step = true;
    } else if (arg == "--few-rows") {
      few_rows = true;
    } else if (arg == "--amx") {
      amx = true;
    } else if (arg == "--gemm") {
      gemm_only = true;
    } else if (const auto shape = gemm_only ? parse_gemm_shape(arg) : std::nullopt) {
      gemm_shapes.push_back(*shape);
    } else if (!arg.empty() && arg.size() <= 4 &&
               arg.find_first_not_of("0123456789") == std::string::npos && std::stoi(arg) > 0) {
      threads = std::stoi(arg);
    } else {
      std::fprintf(stderr,
                   "usage: kernel_speed [threads] [--limits | --attention | --decode-step | "
                   "--few-rows | --amx | --gemm "
                   "M,K,N[,t] ...] (got "
                   "'%s')\n",
                   argv[i]);
      return 2;
    }
  }
  at::set_num_threads(threads);
  at::manual_seed(0);
  if (amx) {
    // Freed blocks stay in glibc's heap and are handed out again, as the host's block cache
    // (runtime/cpu_block_cache.h) hands out its activations: each call's fresh output (412 MB
    // for the LM head) and split activations (38 MB at k = 3072) would otherwise be mapped and
    // faulted in anew, while ATen's side writes into an output made once.
    ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
    if (!kernels::amx_available()) {
      std::fprintf(stderr, "kernel_speed: no AMX-BF16 tiles on this CPU or OS\n");
      return 2;
    }
    amx_rows(threads, fma_peak_gflops(threads));
    return 0;
  }
  const at::AutoGradMode no_grad(false);

  if (attention_only) {
    attention_rows();
    return 0;
  }
  if (decode_step) {
    decode_step_row(threads);
    return 0;
  }
  if (few_rows) {
    few_rows_table(fma_peak_gflops(threads));
    return 0;
  }
  if (gemm_only) {
    // kernels::gemm alone, into an output made once: best of 5 after 0.3 s of warm-up (after one
    // call, a process's first product still ran some 10% slow); then the FMA peak.
    for (const GemmShape& s : gemm_shapes) {
      const int64_t m = s.m, k = s.k, n = s.n;
      const at::Tensor a = at::randn({m, k});
      const at::Tensor b = s.bt ? at::randn({n, k}).t() : at::randn({k, n});
      at::Tensor out = at::empty({m, n});
      const auto run = [&] { kernels::gemm(a, b, {}, false, out); };
      const auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) run();
      std::printf(
          "{\"kind\": \"gemm\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"bt\": %s, "
          "\"seconds\": %.6g}\n",
          s.m, s.k, s.n, s.bt ? "true" : "false", best_seconds(run, 5));
      std::fflush(stdout);
    }
    std::printf(
        "{\"kind\": \"gemm_info\", \"threads\": %d, \"kernels\": \"%s\", \"fma_gflops\": %.1f, "
        "\"fma_isa\": \"%s\"}\n",
        threads, kernels::capability().c_str(), fma_peak_gflops(threads), fma_peak_isa());
    return 0;
  }

  // The GEMM against the FMA peak and ATen's (MKL's) GEMM, on the square shape of bench_speed's
  // roofline and on GPT-2 small's products at 4 x 512 tokens.
  const double peak = fma_peak_gflops(threads);
  const at::Tensor sq = at::randn({2048, 2048});
  if (limits) {
    const double flops = gemm_flops(sq, sq);
    at::Tensor out = at::empty({2048, 2048});
    const at::Tensor big = at::ones({int64_t{1} << 28});  // 1 GiB of fp32, summed: memory read
    const double read_gbs = big.nbytes() / best_seconds([&] { (void)big.sum(); }, 5) / 1e9;
    std::printf(
        "{\"kind\": \"limits_host\", \"host_gemm_gflops\": %.1f, \"fma_gflops\": %.1f, "
        "\"fma_isa\": \"%s\", \"read_gbs\": %.1f, \"kernels\": \"%s\", "
        "\"host_gemm\": \"%s\", \"host_gemm_enabled\": %s}\n",
        flops / best_seconds([&] { kernels::gemm(sq, sq, {}, false, out); }, 5) / 1e9, peak,
        fma_peak_isa(), read_gbs, kernels::capability().c_str(), kernels::gemm_name().c_str(),
        kernels::gemm_enabled() ? "true" : "false");
    return 0;
  }
  std::printf(
      "threads %d, kernels %s, fp32 FMA peak %.0f GFLOP/s (%s), ours: %s (%s by default "
      "here)\n\n",
      threads, kernels::capability().c_str(), peak, fma_peak_isa(), kernels::gemm_name().c_str(),
      kernels::gemm_enabled() ? "on" : "off");
  std::printf(
      "| product | ours ms | ATen ms | ours GFLOP/s | of FMA peak | ATen GFLOP/s | "
      "ATen / ours time |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  gemm_row("[2048, 2048] . [2048, 2048]", sq, sq, {}, peak);
  const at::Tensor x = at::randn({2048, 768}), x4 = at::randn({2048, 3072});
  gemm_row("c_attn [2048, 768] . [768, 2304] + bias", x, at::randn({768, 2304}), at::randn({2304}),
           peak);
  gemm_row("c_fc [2048, 768] . [768, 3072] + bias", x, at::randn({768, 3072}), at::randn({3072}),
           peak);
  gemm_row("mlp c_proj [2048, 3072] . [3072, 768] + bias", x4, at::randn({3072, 768}),
           at::randn({768}), peak);
  gemm_row("LM head [2048, 768] . [50257, 768]^T", x, at::randn({50257, 768}).t(), {}, peak);
  gemm_row("attn c_proj [2048, 768] . [768, 768] + bias", x, at::randn({768, 768}),
           at::randn({768}), peak);
  // One rank's share at tp = 2: column-parallel halves of the outputs, row-parallel of the inputs.
  gemm_row("tp 2: c_attn [2048, 768] . [768, 1152] + bias", x, at::randn({768, 1152}),
           at::randn({1152}), peak);
  gemm_row("tp 2: attn c_proj [2048, 384] . [384, 768]", x.narrow(1, 0, 384).contiguous(),
           at::randn({384, 768}), {}, peak);
  gemm_row("tp 2: c_fc [2048, 768] . [768, 1536] + bias", x, at::randn({768, 1536}),
           at::randn({1536}), peak);
  gemm_row("tp 2: mlp c_proj [2048, 1536] . [1536, 768]", x4.narrow(1, 0, 1536).contiguous(),
           at::randn({1536, 768}), {}, peak);
  gemm_row("tp 2: LM head [2048, 768] . [25152, 768]^T", x, at::randn({25152, 768}).t(), {}, peak);
  gemm_row("weight gradient [2048, 768]^T . [2048, 3072]", x.t(), x4, {}, peak);
  gemm_row("32 rows: 32 x 768 . [768, 2304] + bias", at::randn({32, 768}), at::randn({768, 2304}),
           at::randn({2304}), peak);
  std::printf("\n");
  const at::Tensor big = at::ones({1 << 28});  // 1 GiB: the read-bandwidth limit
  const double read = static_cast<double>(big.nbytes()) / best_seconds([&] { big.sum(); });
  std::printf("threads %d, kernels %s, memory read %.1f GB/s\n\n", threads,
              kernels::capability().c_str(), read / 1e9);
  std::printf("| kernel | ours ms | ATen ms | GB/s | of bandwidth | ATen / ours time |\n");
  std::printf("|---|---|---|---|---|---|\n");

  // Decoding's products: one row against weights far larger than the caches.
  const at::Tensor head = at::randn({50257, 768}), x1 = at::randn({1, 768});
  row("skinny_linear 1 x 768 . [50257, 768]^T (LM head)", head.nbytes(),
      best_seconds([&] { kernels::skinny_linear(x1, head, {}, false); }),
      best_seconds([&] { at::matmul(x1, head.t()); }), read);
  const at::Tensor x8 = at::randn({8, 768});
  row("skinny_linear 8 x 768 . [50257, 768]^T", head.nbytes(),
      best_seconds([&] { kernels::skinny_linear(x8, head, {}, false); }),
      best_seconds([&] { at::matmul(x8, head.t()); }), read);
  std::vector<at::Tensor> fc;  // 12 layers' c_fc (Conv1D [768, 3072]): 113 MB
  for (int i = 0; i < 12; ++i) fc.push_back(at::randn({768, 3072}));
  const at::Tensor bias = at::randn({3072});
  const double fc_bytes = 12.0 * static_cast<double>(fc[0].nbytes());
  for (const at::Tensor& x : {x1, x8}) {
    row(x.size(0) == 1 ? "skinny_linear 1 x 768 . 12 x [768, 3072] (Conv1D)"
                       : "skinny_linear 8 x 768 . 12 x [768, 3072] (Conv1D)",
        fc_bytes, best_seconds([&] {
          for (const at::Tensor& w : fc) kernels::skinny_linear(x, w, bias, true);
        }),
        best_seconds([&] {
          for (const at::Tensor& w : fc) at::addmm(bias, x, w);
        }),
        read);
  }

  attention_rows();

  few_rows_table(peak);
  std::printf("\n");

  // Forward's element-wise steps at 4 x 512 tokens of GPT-2 small.
  const at::Tensor h = at::randn({2048, 3072});
  row("bias_gelu_tanh [2048, 3072] (HF gelu_new: 7 ATen ops)", 2.0 * h.nbytes(),
      best_seconds([&] { kernels::bias_gelu_tanh(h, {}); }), best_seconds([&] {
        0.5 * h*(1.0 + at::tanh(std::sqrt(2.0 / M_PI) * (h + 0.044715 * at::pow(h, 3.0))));
      }),
      read);
  const at::Tensor upstream = at::randn({2048, 3072});
  row("gelu_tanh_backward [2048, 3072] (its ATen formula: 12 ops)", 3.0 * h.nbytes(),
      best_seconds([&] { kernels::gelu_tanh_backward(h, upstream); }), best_seconds([&] {
        const double k = std::sqrt(2.0 / M_PI);
        const at::Tensor x2 = h * h;
        const at::Tensor t = at::tanh(k * h * (1.0 + 0.044715 * x2));
        upstream*(0.5 * (1.0 + t) + (0.5 * k) * h * (1.0 - t * t) * (1.0 + 3.0 * 0.044715 * x2));
      }),
      read);
  const at::Tensor a = at::randn({2048, 768}), r = at::randn({2048, 768});
  const at::Tensor w = at::randn({768}), b = at::randn({768});
  row("add_layer_norm [2048, 768] (add + layer_norm)", 4.0 * a.nbytes(),
      best_seconds([&] { kernels::add_layer_norm(a, r, w, b, 1e-5); }),
      best_seconds([&] { at::layer_norm(a + r, {768}, w, b, 1e-5); }), read);
  // Two ranks' slots, the bias, the residual and the next norm (a tp = 2 sublayer's end).
  const at::Tensor t1 = at::randn({2048, 768}), sum = at::empty_like(a), normed = at::empty_like(a);
  row("sum_add_norm [2048, 768], 2 terms, LayerNorm (add x 3 + layer_norm)", 6.0 * a.nbytes(),
      best_seconds([&] {
        kernels::sum_add_norm({a, t1}, b, r, kernels::NormKind::kLayerNorm, w, b, 1e-5, sum,
                              normed);
      }),
      best_seconds([&] { at::layer_norm(r + (a + t1 + b), {768}, w, b, 1e-5); }), read);
  const at::Tensor rw = at::randn({768});
  row("rms_norm [2048, 768] (5 ATen ops, as HF Llama)", 2.0 * a.nbytes(),
      best_seconds([&] { kernels::rms_norm(a, rw, 1e-6); }),
      best_seconds([&] { rw*(a * at::rsqrt(a.pow(2).mean(-1, true) + 1e-6)); }), read);
  row("sum_add_norm [2048, 768], 2 terms, RMSNorm (add x 2 + HF RMSNorm's ops)", 5.0 * a.nbytes(),
      best_seconds([&] {
        kernels::sum_add_norm({a, t1}, {}, r, kernels::NormKind::kRMSNorm, rw, {}, 1e-6, sum,
                              normed);
      }),
      best_seconds([&] {
        const at::Tensor s = r + (a + t1);
        rw*(s * at::rsqrt(s.pow(2).mean(-1, true) + 1e-6));
      }),
      read);

  // Rotary embedding on q at 4 x 512 tokens, 12 heads of 64 (HF: cat, neg and four ops).
  const at::Tensor q = at::randn({2048, 12, 64});
  const at::Tensor cos = at::randn({2048, 64}), sin = at::randn({2048, 64});
  row("rotary [2048, 12, 64] (HF rotate_half: 6 ATen ops)", 2.0 * q.nbytes(),
      best_seconds([&] { kernels::rotary(q, cos, sin); }), best_seconds([&] {
        const at::Tensor c = cos.unsqueeze(1), s = sin.unsqueeze(1);
        q* c + at::cat({-q.narrow(-1, 32, 32), q.narrow(-1, 0, 32)}, -1) * s;
      }),
      read);

  // The cross-entropy over GPT-2's vocabulary at 2048 tokens: forward statistics and backward.
  const at::Tensor logits = at::randn({2048, 50257}) * 3;
  row("softmax_stats [2048, 50257] (max, sub, exp, sum)", logits.nbytes(),
      best_seconds([&] { kernels::softmax_stats(logits); }, 3),
      best_seconds(
          [&] {
            const at::Tensor max = std::get<0>(logits.max(-1));
            (logits - max.unsqueeze(-1)).exp().sum(-1);
          },
          3),
      read);
  const auto stats = kernels::softmax_stats(logits);
  const at::Tensor &lmax = std::get<0>(stats), &lsum = std::get<1>(stats);
  const at::Tensor target = at::randint(50257, {2048}, at::kLong), scale = at::full({2048}, 1e-3);
  row("softmax_cross_entropy_grad [2048, 50257] (softmax - one_hot) * scale", 2.0 * logits.nbytes(),
      best_seconds([&] { kernels::softmax_cross_entropy_grad(logits, lmax, lsum, target, scale); },
                   3),
      best_seconds(
          [&] {
            at::Tensor grad = (logits - lmax.unsqueeze(-1)).exp().div_(lsum.unsqueeze(-1));
            grad.scatter_add_(-1, target.unsqueeze(-1), at::full({2048, 1}, -1.f));
            grad.mul_(scale.unsqueeze(-1));
          },
          3),
      read);
  return 0;
}

"""The GEMM question, measured: ATen's (MKL), oneDNN (inside LibTorch), OpenBLAS and BLIS on GPT-2
small's, a Llama-1B shape's and ViT-base's (one image: 197 rows) fp32 products, each library in its
own subprocess on the same threads, against the FMA peak measured in the same run
(build/bench/kernel_speed --gemm); a markdown table. It picks the library kernels::gemm runs per
kind of CPU (kernels/cpu/dispatch.cpp)."""
import argparse
import ctypes
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (name, M, K, N, B read transposed: stored [N, K] as nn.Linear's weights and the tied LM head)
SHAPES = [("c_attn", 2048, 768, 2304, False), ("attn c_proj", 2048, 768, 768, False),
          ("c_fc", 2048, 768, 3072, False), ("mlp c_proj", 2048, 3072, 768, False),
          ("LM head", 2048, 768, 50257, True), ("Llama-1B up", 2048, 2048, 8192, True),
          ("Llama-1B down", 2048, 8192, 2048, True),
          ("ViT-base attention, 1 image", 197, 768, 768, True),
          ("ViT-base MLP up, 1 image", 197, 768, 3072, True),
          ("ViT-base MLP down, 1 image", 197, 3072, 768, True)]
LIBS = {"mkl": "ATen / MKL", "onednn": "oneDNN", "openblas": "OpenBLAS (numpy)",
        "blis": "BLIS (Debian)"}
BLIS_SO = [pathlib.Path(f"/usr/lib/x86_64-linux-gnu/blis-{t}/libblis.so.4")
           for t in ("openmp", "pthread")]


def physical_cores() -> int:
    """Cores (not SMT siblings) this process may run on."""
    pairs, phys = set(), None
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = (s.strip() for s in line.partition(":"))
        if key == "physical id":
            phys = value
        elif key == "core id":
            pairs.add((phys, value))
    return min(len(pairs) or os.cpu_count(), len(os.sched_getaffinity(0)))


# ---- workers: one library each, in its own process; JSON lines on stdout ----

def emit(**fields):
    print(json.dumps(fields), flush=True)


def capture_stdout(fn) -> list:
    """The lines C code (MKL_VERBOSE, ONEDNN_VERBOSE) writes to fd 1 while fn runs."""
    sys.stdout.flush()
    with tempfile.TemporaryFile(mode="w+") as tmp:
        saved = os.dup(1)
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
            ctypes.CDLL(None).fflush(None)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().splitlines()


def timed(run, m, k, n, bt, repeats: int):
    """Emits the best of `repeats` timings of run after 0.3 s of warm-up (as kernel_speed's)."""
    start = time.perf_counter()
    while time.perf_counter() - start < 0.3:
        run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    emit(kind="gemm", m=m, k=k, n=n, bt=bt, seconds=best)


def check(out, a, b, what):
    """out[:4, :256] against float64: catches a wrong layout or leading dimension."""
    import numpy as np
    want = a[:4].astype(np.float64) @ b[:, :256].astype(np.float64)
    err = np.abs(np.asarray(out[:4, :256], dtype=np.float64) - want).max() / np.abs(want).max()
    assert err < 1e-4, f"{what}: relative error {err:.2g}"


def torch_worker(lib: str, shapes, threads: int, repeats: int):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    emit(kind="backend", text="call: " + ("torch.mm(a, b, out=c)" if lib == "mkl" else
                                          "torch.ops.mkldnn._linear_pointwise(a, b.t())"))
    for m, k, n, bt in shapes:
        a = torch.randn(m, k)
        b = torch.randn(n, k).t() if bt else torch.randn(k, n)  # a view: as the model holds it
        if lib == "mkl":
            out = torch.empty(m, n)
            run = lambda: torch.mm(a, b, out=out)
        else:  # oneDNN's inner product: weight [N, K] (b.t(), no copy), dense in and out
            run = lambda: torch.ops.mkldnn._linear_pointwise(a, b.t(), None, "none", [], "")

        def verbose():  # the warm-up, with both libraries' verbose output on
            with torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON), \
                    torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                run()
        lines = capture_stdout(verbose)
        check(run().numpy(), a.numpy(), b.numpy(), lib)
        mkl = [l.split() for l in lines if l.startswith("MKL_VERBOSE") and "GEMM(" in l]
        dnn = [l.split(",") for l in lines if l.startswith("onednn_verbose") and ",exec," in l]
        ran = ([f"ran MKL {f[1].split('(')[0]} {f[-1]}" for f in mkl] +
               [f"ran oneDNN {f[5]} {f[6]}" for f in dnn] +
               (["no oneDNN primitive ran"] if lib == "mkl" and not dnn else []) +
               [f"MKL_VERBOSE: {l.split('architecture ')[-1]}" for l in lines
                if "MKL_VERBOSE oneMKL" in l] +
               [l.split(",info,")[-1] for l in lines if l.startswith("onednn_verbose") and
                any(key in l for key in (",isa:", "nthr:", "oneDNN v"))])
        for text in ran or ["no MKL or oneDNN call seen"]:
            emit(kind="backend", text=text)
        timed(run, m, k, n, bt, repeats)


def numpy_worker(shapes, threads: int, repeats: int):
    import numpy as np
    try:
        import threadpoolctl
        limits = threadpoolctl.threadpool_limits(threads, user_api="blas")  # noqa: F841 (held)
        emit(kind="backend", text="call: numpy.matmul(a, b, out=c) (cblas_sgemm); " + "; ".join(
            f"{i['internal_api']} {i['version']} {i['prefix']} coretype {i.get('architecture')}, "
            f"{i['threading_layer']}, {i['num_threads']} threads"
            for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))
    except ImportError:
        emit(kind="backend", text="numpy's BLAS (no threadpoolctl: OPENBLAS_NUM_THREADS only)")
    rng = np.random.default_rng(0)
    for m, k, n, bt in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = (rng.standard_normal((n, k), dtype=np.float32).T if bt else
             rng.standard_normal((k, n), dtype=np.float32))
        out = np.empty((m, n), np.float32)
        run = lambda: np.matmul(a, b, out=out)  # float32 -> cblas_sgemm, transposed b included
        run()
        check(out, a, b, "numpy")
        timed(run, m, k, n, bt, repeats)


def blis_worker(shapes, threads: int, repeats: int, blis_arch: str):
    """cblas_sgemm of Debian's BLIS through ctypes, its sub-config forced when blis_arch."""
    import numpy as np
    path = next(p for p in BLIS_SO if p.exists())
    so = ctypes.CDLL(str(path))
    so.bli_arch_string.restype = so.bli_info_get_version_str.restype = ctypes.c_char_p
    if blis_arch:  # BLIS_ARCH_TYPE takes an arch_t id, read in bli_init
        names = []
        while len(names) < 64 and (not names or names[-1] != "generic"):  # generic ends arch_t
            names.append((so.bli_arch_string(len(names)) or b"").decode())
        os.environ["BLIS_ARCH_TYPE"] = str(names.index(blis_arch))
    so.bli_init()  # first: with BLIS_ARCH_TYPE set, an earlier query aborts (0.9.0)
    so.bli_thread_set_num_threads(ctypes.c_int64(threads))
    arch = so.bli_arch_string(so.bli_arch_query_id()).decode()
    emit(kind="blis_arch", arch=arch)
    emit(kind="backend", text=f"call: cblas_sgemm; BLIS {so.bli_info_get_version_str().decode()} "
         f"({path.parent.name}), sub-config '{arch}'"
         f"{' (BLIS_ARCH_TYPE)' if blis_arch else ' (detected)'}, "
         f"{so.bli_thread_get_num_threads()} threads")
    rng, ptr = np.random.default_rng(0), lambda x: ctypes.c_void_p(x.ctypes.data)
    for m, k, n, bt in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        stored = rng.standard_normal((n, k) if bt else (k, n), dtype=np.float32)
        out = np.empty((m, n), np.float32)
        args = (101, 111, 112 if bt else 111, m, n, k, ctypes.c_float(1), ptr(a), k, ptr(stored),
                k if bt else n, ctypes.c_float(0), ptr(out), n)  # row-major, B^T when [N, K]
        run = lambda: so.cblas_sgemm(*args)
        run()
        check(out, a, stored.T if bt else stored, "blis")
        timed(run, m, k, n, bt, repeats)


# ---- the driver ----

def environment(lib: str, threads: int, isa: str) -> dict:
    """The subprocess's environment: its threads, its ISA cap, and a malloc that keeps memory."""
    env = dict(os.environ)
    for var in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA",
                "DNNL_MAX_CPU_ISA", "BLIS_ARCH_TYPE", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(var, None)  # OpenBLAS's two together: it detects its core and caches itself
    env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
               BLIS_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads if lib == "openblas" else 1))
    # Per-call buffers (oneDNN's output and scratchpad) come back from malloc's free
    # lists instead of fresh pages: a 412 MB LM-head output faulted in per call would be timed.
    tunables = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776"
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), tunables]))
    if isa == "avx2":
        env.update(ATEN_CPU_CAPABILITY="avx2", MKL_ENABLE_INSTRUCTIONS="AVX2",
                   ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2")
        if lib == "openblas":
            env["OPENBLAS_CORETYPE"] = "Haswell"
    return env


def worker_cmd(lib, args, *rest):
    return [sys.executable, __file__, "--worker", lib, "--threads", str(args.threads),
            "--repeats", str(args.repeats), *rest]


def blis_arch(args, cpu_isa: str):
    """(sub-config to force or None, why): haswell for --isa avx2; where BLIS detects 'generic'
    (0.9.0 on CPUs newer than it, e.g. Zen 5) one by this CPU's features, never by its vendor."""
    if args.isa == "avx2":
        return "haswell", ""
    done = subprocess.run(worker_cmd("blis", args, "--probe"), capture_output=True, text=True,
                          env=environment("blis", args.threads, args.isa))
    found = [json.loads(l)["arch"] for l in done.stdout.splitlines() if '"blis_arch"' in l]
    if found != ["generic"] or cpu_isa not in ("AVX-512", "AVX2"):
        return None, ""
    return ("skx" if cpu_isa == "AVX-512" else "haswell"), (
        f"BLIS detects 'generic' here: forced the {cpu_isa} sub-config by CPU features")


def fma_peak(args) -> tuple:
    """(GFLOP/s, ISA) of this machine's fp32 FMA peak on args.threads, from kernel_speed."""
    kernel_speed = args.build / "bench" / "kernel_speed"
    if not kernel_speed.exists():
        return None, f"unknown: {kernel_speed} not built"
    done = subprocess.run([str(kernel_speed), str(args.threads), "--gemm"], capture_output=True,
                          text=True, env=environment("peak", args.threads, "native"))
    for rec in (json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")):
        if rec["kind"] == "gemm_info":
            return rec["fma_gflops"], rec["fma_isa"]
    return None, f"unknown: kernel_speed --gemm exited {done.returncode}"


def run_library(lib: str, shapes, args, cpu_isa: str) -> dict:
    """{'backend': [text], 'seconds': {shape: s}, 'error': text}."""
    specs = [",".join(map(str, s[:3])) + (",t" if s[3] else "") for s in shapes]
    result = {"backend": [], "seconds": {}}
    if lib == "blis" and not any(p.exists() for p in BLIS_SO):
        return result | {"error": "not installed (apt-get install libblis4-openmp: "
                         "tools/setup.sh does)"}
    else:
        cmd = worker_cmd(lib, args, "--shapes", *specs)
        if lib == "blis":
            arch, why = blis_arch(args, cpu_isa)
            cmd += ["--blis-arch", arch] if arch else []
            result["backend"] += [why] if why else []
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env=environment(lib, args.threads, args.isa))
    for rec in (json.loads(l) for l in done.stdout.splitlines() if l.startswith("{")):
        if rec["kind"] == "gemm":
            shape = (rec["m"], rec["k"], rec["n"], rec["bt"])
            result["seconds"][shape] = rec["seconds"]
        elif rec["kind"] == "backend" and rec["text"] not in result["backend"]:
            result["backend"].append(rec["text"])
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        result["error"] = f"exit {done.returncode}: {tail[:200]}"
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, default=physical_cores())
    p.add_argument("--isa", choices=("native", "avx2"), default="native",
                   help="avx2: every library capped at AVX2 (approximates an AVX2-only machine)")
    p.add_argument("--repeats", type=int, default=5, help="best of this many, after a warm-up")
    p.add_argument("--libraries", nargs="+", choices=list(LIBS), default=list(LIBS))
    p.add_argument("--shapes", nargs="+", help="M,K,N[,t] instead of the model's (t: B as [N, K])")
    p.add_argument("--build", type=pathlib.Path, default=ROOT / "build")
    p.add_argument("--worker", choices=list(LIBS), help=argparse.SUPPRESS)
    p.add_argument("--blis-arch", help=argparse.SUPPRESS)
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    shapes = [(spec, *map(int, spec.split(",")[:3]), spec.endswith(",t"))
              for spec in args.shapes] if args.shapes else SHAPES
    dims = [] if args.probe else [s[1:] for s in shapes]
    if args.worker in ("mkl", "onednn"):
        return torch_worker(args.worker, dims, args.threads, args.repeats)
    if args.worker == "openblas":
        return numpy_worker(dims, args.threads, args.repeats)
    if args.worker == "blis":
        return blis_worker(dims, args.threads, args.repeats, args.blis_arch)

    sys.path.insert(0, str(ROOT / "bench"))
    from machine import cpu
    c = cpu()
    results = {lib: run_library(lib, dims, args, c["isa"]) for lib in dict.fromkeys(args.libraries)}
    peak, peak_isa = fma_peak(args)
    print(f"## fp32 GEMM: the libraries, {args.threads} threads\n")
    print(f"cpu: {c['model_name']} ({c['vendor']}, family {c['family']} model {c['model']}, "
          f"{c['isa']}); fp32 FMA peak on {args.threads} threads: "
          f"{f'{peak:.0f} GFLOP/s' if peak else '?'} ({peak_isa}); best of {args.repeats} "
          "after 0.3 s of warm-up, each library in "
          "its own process\n")
    if args.isa == "avx2":
        print("**--isa avx2 only approximates an AVX2-only machine**: each library runs its AVX2 "
              "code (MKL_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2, OPENBLAS_CORETYPE="
              "Haswell, BLIS_ARCH_TYPE=haswell, ATEN_CPU_CAPABILITY=avx2) with this CPU's caches, "
              "clocks and memory. " + (
                  "The peak is this CPU's AVX-512 one: where its cores run 512-bit FMAs at full "
                  "width (Zen 5, Intel server cores) an AVX2 core's is half of it; where they "
                  "split them (Zen 4), the same.\n" if peak_isa == "AVX-512" else "\n"))
    print("What ran (MKL_VERBOSE and ONEDNN_VERBOSE on each warm-up call, threadpoolctl, BLIS's "
          "own queries):\n")
    for lib, r in results.items():
        print(f"- {LIBS[lib]}: " + ("; ".join(r["backend"]) or "-")
              + (f" **{r['error']}**" if "error" in r else ""))
    libs = list(results)
    print("\nGFLOP/s (of the FMA peak). B [N, K]: stored as nn.Linear's weights and the tied LM "
          "head, read transposed. Outputs are made once, but oneDNN's, which come back from "
          "malloc's free lists (GLIBC_TUNABLES, in every process).\n")
    print("| product | M x K x N | B | " + " | ".join(LIBS[lib] for lib in libs)
          + " | best / second best |")
    print("|---" * (4 + len(libs)) + "|")
    for name, m, k, n, bt in shapes:
        rates = {lib: 2.0 * m * k * n / results[lib]["seconds"][(m, k, n, bt)] / 1e9
                 for lib in libs if (m, k, n, bt) in results[lib]["seconds"]}
        cells = [f"{rates[lib]:.0f}" + (f" ({100 * rates[lib] / peak:.0f}%)" if peak else "")
                 if lib in rates else "-" for lib in libs]
        row = f"| {name} | {m} x {k} x {n} | {'[N, K]' if bt else '[K, N]'} | " + " | ".join(cells)
        ranked = sorted(rates, key=rates.get, reverse=True)
        row += (f" | {LIBS[ranked[0]]}, {rates[ranked[0]] / rates[ranked[1]]:.2f} x"
                if len(ranked) > 1 else " | -")
        print(row + " |")


if __name__ == "__main__":
    main()

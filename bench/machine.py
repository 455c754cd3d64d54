"""The machine a benchmark ran on, as every benchmark prints it: the CPU (its model name, vendor,
family and model numbers, and the widest vector instructions it has), the host's CPU product path,
and the machine's limits measured in the same run (the fp32 FMA peak and the memory read
bandwidth, from bench/kernel_speed --limits). Ratios to these limits are the rooflines of the
benchmarks' tables; a GEMM's own rate is never one."""
import json
import pathlib
import subprocess


def cpu() -> dict:
    """Model name, vendor, family / model numbers and the vector ISA, from /proc/cpuinfo."""
    fields = {}
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "vendor_id", "cpu family", "model", "flags") and key not in fields:
            fields[key] = value.strip()
    flags = set(fields.get("flags", "").split())
    isa = ("AVX-512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags
           else "AVX2" if {"avx2", "fma"} <= flags else "SSE")
    return {"model_name": fields.get("model name", "?"), "vendor": fields.get("vendor_id", "?"),
            "family": int(fields.get("cpu family", "0")), "model": int(fields.get("model", "0")),
            "isa": isa}


# The best FMA peak and memory read seen so far in this process, per thread count: a 2-core Zen 3
# VM read 102 GFLOP/s in about one probe of eight (200-205 otherwise; most likely its host placing
# both CPUs on one core's hardware threads for a while), and a limit is what the machine can do.
_best: dict = {}


def limits(build: pathlib.Path, threads: int) -> dict:
    """fp32 FMA peak (GFLOP/s), memory read (GB/s), the host's kernels' ISA and whether its
    own GEMM (packed or OpenBLAS) is on here, measured now on `threads` threads; the peak and the read are the
    best of this measurement and the earlier ones of this process."""
    done = subprocess.run([str(build / "bench" / "kernel_speed"), str(threads), "--limits"],
                          capture_output=True, text=True, check=True)
    now = json.loads(done.stdout.splitlines()[-1])
    best = _best.setdefault(threads, {})
    for key in ("fma_gflops", "read_gbs"):
        best[key] = max(best.get(key, 0.0), now[key])
    return now | best


def describe(build: pathlib.Path, threads: int) -> str:
    """One line naming the CPU, the product path and the limits measured now."""
    c, lim = cpu(), limits(build, threads)
    gemm = lim["host_gemm"] if lim["host_gemm_enabled"] else "ATen's GEMM (MKL)"
    return (f"cpu: {c['model_name']} ({c['vendor']}, family {c['family']} model {c['model']}, "
            f"{c['isa']}); host products: {gemm}, {lim['kernels']} kernels; limits on {threads} "
            f"threads: fp32 FMA peak {lim['fma_gflops']:.0f} GFLOP/s ({lim['fma_isa']}), "
            f"memory read {lim['read_gbs']:.1f} GB/s")

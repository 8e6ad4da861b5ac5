"""Time continuous attention (torch path and CPU kernel, eager and torch.compile) against SDPA on the CPU.

Shapes: PatchTST-like (B*C = 896 series, H = 4, N = 42 patches, D = 4..32, bidirectional) and a
decoder (B = 32, H = 4, N = 512, D = 32, causal); fp32. For each shape and method it reports the
median over repeats of the forward (no grad) and of forward + backward, and the ratio to SDPA
measured in the same run, interleaved (SDPA, eager, compiled, SDPA, ...) so that drift of a noisy
machine hits every method alike; and the first call's seconds (warm-up: compilation for the
compiled methods, the kernel build only if it is not cached yet).

Methods: sdpa; continuous-eager / continuous-compiled (backend="torch", the pure-PyTorch path);
continuous-cpu-kernel / continuous-cpu-kernel-compiled (backend="cpu", the fused C++ kernel, an
opaque custom op under torch.compile).

With ``--clock cpu`` the times are the process's CPU seconds (all threads) instead of wall-clock
seconds: work done rather than latency, unaffected by other processes preempting this one on a
shared machine. Use it with ``--threads 1``: idle OpenMP workers spin, and spinning counts as CPU
time (for SDPA and the torch path, not for the CPU kernel, whose threads block).

``--vector-bytes 16|32|64`` times the CPU kernel built with that SIMD vector width instead of the
default one (the widest registers of the machine), e.g. to measure what the width is worth here.

    python benchmarks/bench_op_cpu.py [--repeats 7] [--quick] [--no-compile] [--methods sdpa,...]
                                      [--threads N] [--clock wall|cpu] [--csv out.csv] [--vector-bytes N]
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tsattn import continuous_attention  # noqa: E402
from tsattn.ops.continuous import cpu_build, cpu_kernel  # noqa: E402

SHAPES = [
    # name, B, H, N, D, causal
    ("patchtst-d4", 896, 4, 42, 4, False),
    ("patchtst-d8", 896, 4, 42, 8, False),
    ("patchtst-d16", 896, 4, 42, 16, False),
    ("patchtst-d32", 896, 4, 42, 32, False),
    ("decoder-n512", 32, 4, 512, 32, True),
]


def sdpa(q, k, v, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def continuous_eager(q, k, v, causal):
    return continuous_attention(q, k, v, causal=causal, backend="torch")


def continuous_cpu_kernel(q, k, v, causal):
    return continuous_attention(q, k, v, causal=causal, backend="cpu")


_compiled = {}


def _compiled_call(name, fn, q, k, v, causal):
    # one compiled function per shape and method (reset in bench_shape): no recompile limit is ever reached
    if name not in _compiled:
        _compiled[name] = torch.compile(fn, dynamic=False)
    return _compiled[name](q, k, v, causal)


def continuous_compiled(q, k, v, causal):
    return _compiled_call("torch", continuous_eager, q, k, v, causal)


def continuous_cpu_kernel_compiled(q, k, v, causal):
    return _compiled_call("cpu", continuous_cpu_kernel, q, k, v, causal)


METHODS = {
    "sdpa": sdpa,
    "continuous-eager": continuous_eager,
    "continuous-compiled": continuous_compiled,
    "continuous-cpu-kernel": continuous_cpu_kernel,
    "continuous-cpu-kernel-compiled": continuous_cpu_kernel_compiled,
}
COMPILED = ("continuous-compiled", "continuous-cpu-kernel-compiled")


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = {"now": time.perf_counter}


def one_run(fn, inputs, grad_out, causal, backward):
    q, k, v = inputs
    now = _clock["now"]
    start = now()
    if backward:
        out = fn(q, k, v, causal)
        out.backward(grad_out)
    else:
        with torch.no_grad():
            fn(q, k, v, causal)
    return now() - start


def bench_shape(b, h, n, d, causal, repeats, methods):
    torch._dynamo.reset()
    _compiled.clear()
    g = torch.Generator().manual_seed(0)
    inputs = [torch.randn(b, h, n, d, generator=g).requires_grad_() for _ in range(3)]
    grad_out = torch.randn(b, h, n, d, generator=g)
    times = {(m, bw): [] for m in methods for bw in (False, True)}
    first_call = {m: 0.0 for m in methods}
    for backward in (False, True):
        for m in methods:  # warm-up (and compilation) outside the timed loop
            first_call[m] += one_run(METHODS[m], inputs, grad_out, causal, backward)
            one_run(METHODS[m], inputs, grad_out, causal, backward)
        for _ in range(repeats):
            for m in methods:
                times[(m, backward)].append(one_run(METHODS[m], inputs, grad_out, causal, backward))
    medians = {key: statistics.median(ts) * 1e3 for key, ts in times.items()}
    return medians, first_call


def use_vector_width(vector_bytes: int) -> None:
    """Make the CPU kernel the one built with ``-DVECTOR_BYTES=vector_bytes`` (cached like the default)."""
    path = cpu_build.build(cpu_kernel.cache_dir(), extra_flags=(f"-DVECTOR_BYTES={vector_bytes}",))
    cpu_kernel._LIBRARY["lib"] = cpu_kernel._bind(cpu_build.load(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="one PatchTST shape and the decoder, 3 repeats")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    parser.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)} (sdpa is always run)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (default: torch's own choice)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="wall-clock seconds (default) or the process's CPU seconds over all threads")
    parser.add_argument("--csv", type=pathlib.Path, help="also write the rows to this CSV file")
    parser.add_argument("--vector-bytes", type=int, choices=(16, 32, 64),
                        help="build the CPU kernel with this SIMD vector width (default: the machine's widest)")
    args = parser.parse_args()
    if args.vector_bytes:
        use_vector_width(args.vector_bytes)
    shapes = [SHAPES[2], SHAPES[4]] if args.quick else SHAPES
    repeats = 3 if args.quick else args.repeats
    _clock["now"] = CLOCKS[args.clock]
    if args.threads:
        torch.set_num_threads(args.threads)
    methods = [m for m in METHODS if not (args.no_compile and m in COMPILED)]
    if args.methods:
        chosen = set(args.methods.split(",")) | {"sdpa"}
        unknown = chosen - set(METHODS)
        if unknown:
            parser.error(f"unknown methods {sorted(unknown)}; choose from {list(METHODS)}")
        methods = [m for m in methods if m in chosen]

    lib = cpu_kernel.load_library()
    width = f"CPU kernel vectors of {lib.tsattn_cpu_vector_bytes()} bytes" if lib is not None else "no CPU kernel"
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
          f"{width}")
    print(f"# fp32, median of {repeats} interleaved repeats ({args.clock} clock); ratio = method / SDPA in the same run")
    header = ["shape", "B", "H", "N", "D", "causal", "method", "fwd_ms", "fwd_ratio", "fwdbwd_ms", "fwdbwd_ratio",
              "first_call_s"]
    rows = []
    for name, b, h, n, d, causal in shapes:
        t, first_call = bench_shape(b, h, n, d, causal, repeats, methods)
        for m in methods:
            rows.append([name, b, h, n, d, causal, m,
                         f"{t[(m, False)]:.2f}", f"{t[(m, False)] / t[('sdpa', False)]:.2f}",
                         f"{t[(m, True)]:.2f}", f"{t[(m, True)] / t[('sdpa', True)]:.2f}", f"{first_call[m]:.2f}"])
        print(f"done {name}", file=sys.stderr, flush=True)
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, widths)))
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            csv.writer(fh).writerows([header] + rows)


if __name__ == "__main__":
    main()

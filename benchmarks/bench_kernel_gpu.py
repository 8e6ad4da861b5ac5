#!/usr/bin/env python
"""Fused Triton continuous attention on a GPU: correctness first, then speed against SDPA (flash).

    python benchmarks/bench_kernel_gpu.py            # check + timings + memory (~4-6 minutes on an H200)
    python benchmarks/bench_kernel_gpu.py --sweep    # also a block-size sweep at N = 4096, D = 64 and 128
    python benchmarks/bench_kernel_gpu.py --sweep-only   # only the sweep (each candidate checked, then timed)
    TRITON_INTERPRET=1 python benchmarks/bench_kernel_gpu.py --dry-run   # CPU smoke test of this script

Runs from a bare checkout (the repository root is put on sys.path). Steps:
1. correctness: the Triton path (bf16 and fp32 inputs) against the torch path on the fp32 upcast of
   the same inputs, o and every gradient (q, k, v, k0, v0, dt), relative errors, also for small
   heads (D = 4, 8: zero-padded in the kernels), cross-attention (M != N) and ragged rows
   (key_lengths with a 0 and a full length; the padding's gradient must be exactly zero); the
   allocator is poisoned with NaN first, so an element a kernel fails to write shows up as
   non-finite; then determinism: under torch.use_deterministic_algorithms(True) two backward
   passes must give bitwise equal gradients (the separate dq kernel, not the atomics);
2. timings (triton.testing.do_bench, median) of forward and forward+backward, bf16, learned per-head
   sink, for N in {512, 1024, 4096, 16384}, D in {64, 128}, causal and bidirectional, against
   scaled_dot_product_attention restricted to the flash backend; forward+backward is timed with dq
   by atomics (the default) and with the separate dq kernel; then N = 4096 at D = 8 and 16 (the
   padding's cost) and with ragged rows (key_lengths uniform in [N/2, N]);
3. peak memory of forward+backward at N = 16384 (over the inputs), Triton vs SDPA.
TFLOP/s are counted as for softmax attention: 4 B H N^2 D forward (half of it causal), forward +
backward 3.5 times that. With $OUT set, the full results go to $OUT/bench_kernel_gpu.json and .csv.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from tsattn.ops.continuous import function as tfn  # noqa: E402
from tsattn.ops.continuous.api import continuous_attention  # noqa: E402

TIME_BUDGET_S = 420.0          # stop starting new timings after this (the lease allows ~8 minutes a call)
HEADS = 16
TOKENS = 2 ** 17               # B * N per shape (B >= 1), so that every shape fills the chip
SEQ_LENS = (512, 1024, 4096, 16384)
HEAD_DIMS = (64, 128)
MEMORY_N = 16384
SWEEP_N = 4096
DEVICE = "cuda"
SDPA_BACKEND = SDPBackend.FLASH_ATTENTION
# bf16: P and dA are rounded to bf16 before their dots and o before delta = rowsum(dO o); the
# interpreter saw up to 2e-2 (dk0, a sum over batch and queries) at N = 33
CHECK_TOL = {torch.float32: 1e-4, torch.bfloat16: 5e-2}
# (N, D, causal, dtype, dq by atomics[, M queries, ragged rows]): odd lengths, both dq paths, fp32
# with IEEE dots; small (padded) heads, cross-attention and key_lengths
CHECKS = [
    (257, 64, True, torch.bfloat16, True), (257, 64, False, torch.bfloat16, True),
    (1000, 128, True, torch.bfloat16, True), (1000, 128, False, torch.bfloat16, True),
    (257, 64, True, torch.bfloat16, False), (1000, 128, False, torch.bfloat16, False),
    (333, 64, True, torch.float32, True), (333, 64, False, torch.float32, False),
    (257, 8, True, torch.bfloat16, True), (333, 4, False, torch.float32, False),
    (257, 8, False, torch.bfloat16, True, 100, True), (333, 64, True, torch.float32, True, 333, True),
    (1000, 4, False, torch.float32, False, 37, True),
]
# extra timed shapes at N = 4096, bidirectional: (D, ragged rows)
EXTRA_SHAPES = [(8, False), (16, False), (64, True)]
DETERMINISM_SHAPE = None       # (N, D) of the determinism check; None = its defaults
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def poison_allocator() -> None:
    """Fill cached allocator blocks of both pools with NaN, then free them: outputs allocated next
    start as NaN wherever the caching allocator hands those blocks out again."""
    if DEVICE != "cuda":
        return
    blocks = [torch.full((2 ** 18,), float("nan"), device="cuda") for _ in range(256)]   # 1 MiB: small pool
    blocks.append(torch.full((2 ** 29,), float("nan"), device="cuda"))                    # 2 GiB: large pool
    torch.cuda.synchronize()
    del blocks


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def attention_inputs(b, h, n, d, dtype, *, grad=True, dt=False, seed=0, m=None):
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    mk = lambda *shape, s=1.0: (s * torch.randn(*shape, generator=g, device=DEVICE)).to(dtype)  # noqa: E731
    x = dict(q=mk(b, h, n if m is None else m, d, s=2.0), k=mk(b, h, n, d), v=mk(b, h, n, d), k0=mk(h, 1, d),
             v0=mk(h, 1, d))
    if dt:
        x["dt"] = (0.1 + 2.0 * torch.rand(b, n, generator=g, device=DEVICE)).to(dtype)
    return {key: t.requires_grad_(grad) for key, t in x.items()}


# ---------------------------------------------------------------------------------------------
# 1. correctness on the GPU
# ---------------------------------------------------------------------------------------------
def check(n: int, d: int, causal: bool, dtype: torch.dtype, atomic: bool, m: int | None = None,
          ragged: bool = False, h: int = 4) -> dict:
    tfn.ATOMIC_DQ = atomic
    b = 3 if ragged else 2
    m = n if m is None else m
    lengths = torch.tensor([n, 0, n // 3], device=DEVICE) if ragged else None
    x = attention_inputs(b, h, n, d, dtype, dt=True, seed=n + d, m=m)
    go = torch.randn(b, h, m, d, device=DEVICE, generator=torch.Generator(device=DEVICE).manual_seed(n))
    names = list(x)
    poison_allocator()
    o = continuous_attention(**x, causal=causal, key_lengths=lengths, backend="triton")
    got = [o, *torch.autograd.grad(o, [x[k] for k in names], go.to(dtype))]
    up = {k: t.detach().float().requires_grad_() for k, t in x.items()}
    o_ref = continuous_attention(**up, causal=causal, key_lengths=lengths, backend="torch")
    ref = [o_ref, *torch.autograd.grad(o_ref, [up[k] for k in names], go)]
    labels = ["o"] + ["d" + k for k in names]
    errors = {lab: rel(a, r) for lab, a, r in zip(labels, got, ref)}
    finite = all(bool(torch.isfinite(a).all()) for a in got)
    padding_zero = True
    if ragged:   # dk, dv, ddt of the padding: exactly zero
        grads = dict(zip(labels, got))
        for row, length in enumerate(lengths.tolist()):
            padding_zero &= all(bool((grads[lab][row, :, length:] == 0).all()) for lab in ("dk", "dv"))
            padding_zero &= bool((grads["ddt"][row, length:] == 0).all())
    worst = max(errors.values())
    ok = finite and padding_zero and worst <= CHECK_TOL[dtype]
    tfn.ATOMIC_DQ = None
    return dict(n=n, m=m, d=d, causal=causal, ragged=ragged, dtype=str(dtype).replace("torch.", ""),
                atomic_dq=atomic, finite=finite, padding_zero=padding_zero, ok=ok, worst=worst, **errors)


def determinism(n: int = 1000, d: int = 64) -> dict:
    """Under torch.use_deterministic_algorithms(True) (warn_only: cuBLAS elsewhere may only warn),
    ATOMIC_DQ = None must pick the dq kernel: two backward passes give bitwise equal gradients."""
    tfn.ATOMIC_DQ = None
    was_on = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.use_deterministic_algorithms(True, warn_only=True)
        x = attention_inputs(4, 8, n, d, torch.bfloat16, dt=True, seed=1)
        go = torch.randn(4, 8, n, d, device=DEVICE, dtype=torch.bfloat16)
        runs = []
        for _ in range(2):
            o = continuous_attention(**x, causal=True, backend="triton")
            runs.append(torch.autograd.grad(o, list(x.values()), go))
        same = all(torch.equal(a, b) for a, b in zip(*runs))
        return dict(atomic_dq_chosen=tfn.use_atomic_dq(), bitwise_equal=same, ok=same and not tfn.use_atomic_dq())
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=warn_only)


# ---------------------------------------------------------------------------------------------
# 2. timings
# ---------------------------------------------------------------------------------------------
def bench(fn, grads=()) -> float:
    if DEVICE != "cuda":  # dry run: one call, wall clock
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    return triton.testing.do_bench(fn, warmup=25, rep=100, grad_to_none=list(grads), return_mode="median")


def time_shape(n: int, d: int, causal: bool, full: bool = True, ragged: bool = False) -> dict:
    """Median times of one shape; ``full=False`` (the sweep) times only our forward and forward+backward;
    ``ragged``: key_lengths uniform in [N/2, N] (SDPA still reads every key)."""
    b = max(1, TOKENS // n)
    h = HEADS
    x = attention_inputs(b, h, n, d, torch.bfloat16, seed=n * 3 + d + causal)
    go = torch.randn(b, h, n, d, device=DEVICE, dtype=torch.bfloat16)
    leaves = list(x.values())
    row = dict(B=b, H=h, N=n, D=d, causal=causal, ragged=ragged)
    lengths = None
    if ragged:
        lengths = torch.randint(n // 2, n + 1, (b,), device=DEVICE)
        row["mean_length"] = float(lengths.float().mean())

    def ours():
        return continuous_attention(**x, causal=causal, key_lengths=lengths, backend="triton", validate=False)

    def sdpa():
        return F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal)

    with torch.no_grad():
        row["fwd_ms"] = bench(ours)
    tfn.ATOMIC_DQ = True
    row["fwdbwd_ms"] = bench(lambda: ours().backward(go), leaves)
    tfn.ATOMIC_DQ = None
    if not full:
        return row
    tfn.ATOMIC_DQ = False
    row["fwdbwd_dqkernel_ms"] = bench(lambda: ours().backward(go), leaves)
    tfn.ATOMIC_DQ = None
    with sdpa_kernel(SDPA_BACKEND):
        with torch.no_grad():
            row["sdpa_fwd_ms"] = bench(sdpa)
        row["sdpa_fwdbwd_ms"] = bench(lambda: sdpa().backward(go), leaves[:3])

    flops_fwd = 4.0 * b * h * n * n * d * (0.5 if causal else 1.0)
    best = min(row["fwdbwd_ms"], row["fwdbwd_dqkernel_ms"])
    row["ratio_fwd"] = row["fwd_ms"] / row["sdpa_fwd_ms"]
    row["ratio_fwdbwd"] = best / row["sdpa_fwdbwd_ms"]
    row["tflops_fwd"] = flops_fwd / row["fwd_ms"] * 1e-9
    row["tflops_fwdbwd"] = 3.5 * flops_fwd / best * 1e-9
    row["sdpa_tflops_fwdbwd"] = 3.5 * flops_fwd / row["sdpa_fwdbwd_ms"] * 1e-9
    return row


# ---------------------------------------------------------------------------------------------
# 3. memory
# ---------------------------------------------------------------------------------------------
def peak_memory(n: int, d: int, causal: bool) -> dict:
    out = {}
    for name in ("triton", "sdpa"):
        x = attention_inputs(1, HEADS, n, d, torch.bfloat16, seed=1)
        go = torch.randn(1, HEADS, n, d, device=DEVICE, dtype=torch.bfloat16)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        if name == "triton":
            continuous_attention(**x, causal=causal, backend="triton").backward(go)
        else:
            with sdpa_kernel(SDPA_BACKEND):
                F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=causal).backward(go)
        torch.cuda.synchronize()
        out[f"{name}_peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2 ** 20
        del x, go
    out.update(B=1, H=HEADS, N=n, D=d, causal=causal)
    return out


SWEEP_CANDIDATES = {   # (block_m, block_n, warps, stages) per (kernel, D); the first is the current table's
    ("fwd", 64): [(128, 64, 8, 2), (128, 128, 8, 2), (64, 64, 4, 3), (128, 32, 4, 3), (64, 128, 4, 2),
                  (128, 64, 4, 2), (128, 64, 8, 3)],
    ("fwd", 128): [(128, 32, 8, 2), (128, 64, 8, 2), (64, 64, 4, 2), (128, 64, 8, 3), (64, 32, 4, 3),
                   (64, 64, 8, 2)],
    ("bwd", 64): [(32, 64, 4, 2), (64, 64, 8, 2), (32, 128, 8, 2), (64, 128, 8, 2), (16, 64, 4, 2),
                  (32, 64, 8, 2), (64, 32, 4, 2)],
    ("bwd", 128): [(32, 32, 8, 2), (32, 32, 4, 2), (16, 64, 4, 2), (32, 64, 8, 2), (64, 64, 8, 2),
                   (16, 32, 4, 2), (64, 32, 8, 2), (32, 128, 8, 2)],
}


def sweep() -> list[dict]:
    """Block sizes at N = SWEEP_N (4096), bidirectional, D = 64 and 128: forward configs, then dK/dV
    configs (atomic dq). Each candidate is first checked for correctness (bf16, N = 257, o and every
    gradient against the torch path), then timed."""
    rows = []
    n, causal = SWEEP_N, False
    fwd_default, bwd_default = tfn.fwd_config, tfn.bwd_config
    for (kind, d), cands in SWEEP_CANDIDATES.items():
        if d not in HEAD_DIMS:
            continue
        for cand in cands:
            if time.time() - T0 > TIME_BUDGET_S:
                break
            cfg = tfn.KernelConfig(*cand)
            if kind == "fwd":
                tfn.fwd_config = lambda *a, cfg=cfg: cfg
            else:
                tfn.bwd_config = lambda *a, cfg=cfg: cfg
            try:
                c = check(257 if DEVICE == "cuda" else 33, d, causal, torch.bfloat16, True)
                r = time_shape(n, d, causal, full=False)
                rows.append(dict(kind=kind, d=d, config=str(cand), ok=c["ok"], worst=c["worst"],
                                 fwd_ms=r["fwd_ms"], fwdbwd_ms=r["fwdbwd_ms"]))
            except Exception as exc:  # out of resources, compile failure: record and go on
                rows.append(dict(kind=kind, d=d, config=str(cand), error=repr(exc)[:200]))
            finally:
                tfn.fwd_config, tfn.bwd_config = fwd_default, bwd_default
                tfn.ATOMIC_DQ = None
            log(f"sweep {rows[-1]}")
    return rows


def output_dir() -> Path | None:
    """$OUT (created), where the full results go; None when unset."""
    if not os.environ.get("OUT"):
        return None
    out = Path(os.environ["OUT"])
    out.mkdir(parents=True, exist_ok=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="also sweep block sizes at N=4096, D=64 and 128")
    parser.add_argument("--sweep-only", action="store_true",
                        help="only the block-size sweep (each candidate checked, then timed; no other tables)")
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU smoke test under TRITON_INTERPRET=1: tiny shapes, SDPA math backend, no memory")
    args = parser.parse_args()
    global DEVICE, SDPA_BACKEND, SEQ_LENS, HEAD_DIMS, TOKENS, HEADS, CHECKS, SWEEP_N, EXTRA_SHAPES, DETERMINISM_SHAPE
    if args.dry_run:
        if not tfn.interpreting():
            print("--dry-run needs TRITON_INTERPRET=1 in the environment")
            return 2
        DEVICE, SDPA_BACKEND, SEQ_LENS, HEAD_DIMS, TOKENS, HEADS = "cpu", SDPBackend.MATH, (33,), (16,), 66, 2
        SWEEP_N = 33
        SWEEP_CANDIDATES.clear()
        SWEEP_CANDIDATES.update({("fwd", 16): [(16, 16, 1, 1), (32, 16, 1, 1)], ("bwd", 16): [(16, 16, 1, 1)]})
        CHECKS = [(33, 16, True, torch.bfloat16, True), (21, 16, False, torch.float32, False),
                  (21, 8, False, torch.float32, False, 9, True)]
        EXTRA_SHAPES = [(8, True)]
        DETERMINISM_SHAPE = (17, 8)
    elif not torch.cuda.is_available():
        print("no CUDA device: this script needs a GPU (or --dry-run under TRITON_INTERPRET=1)")
        return 2
    else:
        assert not tfn.interpreting(), "unset TRITON_INTERPRET for the GPU benchmark"
    torch.backends.cuda.matmul.allow_tf32 = False
    if DEVICE == "cuda":
        props = torch.cuda.get_device_properties(0)
        device_name, sms = props.name, props.multi_processor_count
    else:
        device_name, sms = "cpu (Triton interpreter, dry run)", 0
    meta = dict(device=device_name, sms=sms, torch=torch.__version__,
                triton=triton.__version__, date=datetime.datetime.now().isoformat(timespec="seconds"))
    log(f"{meta}")

    if args.sweep_only:
        rows = sweep()
        out_dir = output_dir()
        if out_dir:
            result = dict(meta=meta, sweep=rows)
            (out_dir / "bench_kernel_sweep.json").write_text(json.dumps(result, indent=1, default=str))
        print(f"\n{meta['device']}  torch {meta['torch']}  triton {meta['triton']}  {meta['date']}")
        print(f"sweep N={SWEEP_N} bidirectional bf16 (dq by atomics):")
        for r in rows:
            print(f"{r['kind']:>4} D{r['d']:<4} {r['config']:>18} " + (f"ERROR {r['error'][:80]}" if "error" in r else
                  f"ok={r['ok']} worst={r['worst']:.1e} fwd {r['fwd_ms']:8.3f} ms  f+b {r['fwdbwd_ms']:8.3f} ms"))
        return 0 if all(r.get("ok") for r in rows) else 1
    checks = []
    for n, d, causal, dtype, atomic, *cross in CHECKS:
        try:
            checks.append(check(n, d, causal, dtype, atomic, *cross))
        except Exception as exc:  # a compile or launch failure: record it, go on to the timings
            checks.append(dict(n=n, d=d, causal=causal, dtype=str(dtype).replace("torch.", ""), atomic_dq=atomic,
                               ok=False, error=repr(exc)[:300]))
        finally:
            tfn.ATOMIC_DQ = None
        log(f"check {checks[-1]}")
    try:
        deterministic = determinism(*(DETERMINISM_SHAPE or ()))
    except Exception as exc:
        deterministic = dict(ok=False, error=repr(exc)[:300])
    log(f"determinism {deterministic}")
    all_ok = all(c["ok"] for c in checks) and deterministic["ok"]
    log("CORRECTNESS " + ("PASS" if all_ok else "FAIL: timings below are of a wrong kernel"))

    rows, skipped = [], []
    for n in SEQ_LENS:
        for d in HEAD_DIMS:
            for causal in (False, True):
                if time.time() - T0 > TIME_BUDGET_S:
                    skipped.append((n, d, causal))
                    continue
                try:
                    rows.append(time_shape(n, d, causal))
                except Exception as exc:
                    rows.append(dict(N=n, D=d, causal=causal, error=repr(exc)[:300]))
                finally:
                    tfn.ATOMIC_DQ = None
                log(f"time {rows[-1]}")
    for d, ragged in EXTRA_SHAPES:
        n = SEQ_LENS[-2] if len(SEQ_LENS) > 1 else SEQ_LENS[0]
        if time.time() - T0 > TIME_BUDGET_S:
            skipped.append((n, d, False, "ragged" if ragged else ""))
            continue
        try:
            rows.append(time_shape(n, d, False, ragged=ragged))
        except Exception as exc:
            rows.append(dict(N=n, D=d, causal=False, ragged=ragged, error=repr(exc)[:300]))
        finally:
            tfn.ATOMIC_DQ = None
        log(f"time {rows[-1]}")
    memory = []
    for causal in (False, True) if DEVICE == "cuda" else ():
        if time.time() - T0 > TIME_BUDGET_S + 30:
            skipped.append(("memory", causal))
            continue
        try:
            memory.append(peak_memory(MEMORY_N, 64, causal))
        except Exception as exc:
            memory.append(dict(N=16384, causal=causal, error=repr(exc)[:300]))
        log(f"memory {memory[-1]}")
    sweep_rows = sweep() if args.sweep else []

    result = dict(meta=meta, checks=checks, determinism=deterministic, timings=rows, memory=memory,
                  sweep=sweep_rows, skipped=skipped)
    out_dir = output_dir()
    if out_dir:
        (out_dir / "bench_kernel_gpu.json").write_text(json.dumps(result, indent=1, default=str))
        keys = sorted({k for r in rows for k in r})
        with open(out_dir / "bench_kernel_gpu.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            writer.writerows(rows)

    print()
    print(f"{meta['device']}  torch {meta['torch']}  triton {meta['triton']}  {meta['date']}")
    print("correctness (worst rel. error over o and all grads): "
          + ", ".join(f"{c['dtype']} N{c['n']}{'' if c.get('m', c['n']) == c['n'] else ' M' + str(c['m'])} D{c['d']}"
                      f" {'c' if c['causal'] else 'b'}{' ragged' if c.get('ragged') else ''}"
                      f"{'' if c.get('atomic_dq', True) else ' dqk'}: "
                      f"{c.get('worst', math.nan):.1e}{'' if c['ok'] else ' FAIL'}" for c in checks))
    print(f"determinism (ATOMIC_DQ=None under use_deterministic_algorithms): {deterministic}")
    print(f"{'B,H,N,D':>16} {'causal':>6} {'fwd ms':>8} {'f+b ms':>8} {'f+b dqk':>8} {'sdpa f':>8} "
          f"{'sdpa f+b':>8} {'ratio f':>7} {'ratio fb':>8} {'TF/s f':>7} {'TF/s fb':>7}")
    for r in rows:
        shape = f"{r.get('B', '?')},{r.get('H', '?')},{r['N']},{r['D']}{' ragged' if r.get('ragged') else ''}"
        if "error" in r:
            print(f"{shape:>16} {str(r['causal']):>6} ERROR {r['error'][:80]}")
            continue
        print(f"{shape:>16} {str(r['causal']):>6} {r['fwd_ms']:8.3f} {r['fwdbwd_ms']:8.3f} "
              f"{r['fwdbwd_dqkernel_ms']:8.3f} {r['sdpa_fwd_ms']:8.3f} {r['sdpa_fwdbwd_ms']:8.3f} "
              f"{r['ratio_fwd']:7.2f} {r['ratio_fwdbwd']:8.2f} {r['tflops_fwd']:7.1f} {r['tflops_fwdbwd']:7.1f}")
    for m in memory:
        if "error" in m:
            print(f"memory N={m['N']} causal={m['causal']}: ERROR {m['error'][:80]}")
        else:
            print(f"peak memory fwd+bwd B=1 H={m['H']} N={m['N']} D={m['D']} causal={m['causal']}: "
                  f"triton {m['triton_peak_mib']:.0f} MiB, sdpa {m['sdpa_peak_mib']:.0f} MiB")
    if skipped:
        print(f"skipped (time budget): {skipped}")
    print(f"total {time.time() - T0:.0f}s; correctness {'PASS' if all_ok else 'FAIL'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())

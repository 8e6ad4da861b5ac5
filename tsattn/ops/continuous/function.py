"""Triton backend of continuous attention: block-size heuristics, launchers, autograd.Function.

``continuous_attention_triton`` is what ``continuous_attention(..., backend="triton")`` calls with
q [B,H,M,D], k [B,H,N,D], v [B,H,N,Dv], k0 [B,H,1,D], v0 [B,H,1,Dv] and dt [B,N] already expanded
(possibly stride-0 views) and key_lengths [B] or None. Gradients flow to q, k, v, k0, v0 and dt;
memory is O(M + N): O, the row LSE and O((M + N) D) gradient buffers.

Choices (see benchmarks/KERNEL_NOTES.md):
- the sink is concatenated on the host (keys = [k0; k], values = [v0; v]: one O(N D) copy), so
  the kernels see N + 1 knots and need no special case for knot 0;
- any head dim 1..128: the kernels' tiles are the next power of two >= 16 wide (``padded_dim``)
  and masked loads fill the extra columns with zeros (exact; no host-side copy);
- key_lengths go to the kernels as an int32 [B] tensor; each program reads its row's length and
  masks (and stops its loops at) the intervals past it, so no host synchronisation is needed;
- dK/dV of a block's left and right knots go to two fp32 buffers added on the host, so no knot
  is written by two programs;
- dq by fp32 atomics inside the dK/dV kernel on a GPU (the elementwise work, which dominates
  here, is done once); a separate dq kernel (deterministic) under the interpreter, in torch's
  deterministic mode, or when ``ATOMIC_DQ`` is set to False (``use_atomic_dq``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import triton

from .api import TRITON_DTYPES, TRITON_MAX_HEAD_DIM
from .triton_bwd import _bwd_dkdv_kernel, _bwd_dq_kernel, _bwd_preprocess
from .triton_fwd import _fwd_kernel

MAX_HEAD_DIM = TRITON_MAX_HEAD_DIM
SUPPORTED_DTYPES = TRITON_DTYPES
# dq accumulated by atomics in the dK/dV kernel: True/False forces it (tests, benchmarks); None
# (default): on a GPU unless torch's deterministic mode is on, never under the interpreter.
ATOMIC_DQ: Optional[bool] = None
# tl.dot precision for float32 inputs: "ieee" keeps fp32 accuracy; "tf32" is faster and ~3e-4.
FP32_DOT_PRECISION = "ieee"


# ---------------------------------------------------------------------------------------------
# Heuristics
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KernelConfig:
    """Block sizes and launch options of one kernel."""

    block_m: int        # queries per tile
    block_n: int        # intervals (knots) per tile
    num_warps: int = 4
    num_stages: int = 2


def interpreting() -> bool:
    """True when Triton runs its CPU interpreter (TRITON_INTERPRET=1 was set before the import)."""
    return not isinstance(_fwd_kernel, triton.runtime.JITFunction)


def fwd_config(d: int, dv: int, causal: bool) -> KernelConfig:
    """Forward tiles [block_m queries, block_n intervals]. Under the interpreter the smallest legal
    ones; on a GPU the largest ones for which ptxas (sm_90a, bf16) reports no spills: a first
    guess until measured (benchmarks/KERNEL_NOTES.md)."""
    if interpreting():
        return KernelConfig(16, 16, 1, 1)
    if max(d, dv) <= 64:
        return KernelConfig(128, 64, 8, 2)
    return KernelConfig(128, 32, 8, 2)


def bwd_config(d: int, dv: int, causal: bool) -> KernelConfig:
    """dK/dV kernel: block_n intervals per program, block_m queries per step. Four fp32
    accumulators [block_n, D] plus the elementwise tiles make this the register-bound kernel. From
    sm_90a SASS: at D <= 64, (32, 64, 4 warps) issues 109 instructions per score element with a
    600-byte spill frame, against 160 for the spill-free (64, 32, 8); at D = 128 the same shape
    spills 2 KB per thread, so the spill-free (32, 32, 8) is kept (340 per element). First guesses
    until measured (KERNEL_NOTES.md; the benchmark's --sweep)."""
    if interpreting():
        return KernelConfig(16, 16, 1, 1)
    if max(d, dv) <= 64:
        return KernelConfig(32, 64, 4, 2)
    return KernelConfig(32, 32, 8, 2)


def dq_config(d: int, dv: int, causal: bool) -> KernelConfig:
    """Separate dq kernel (when dq is not accumulated by atomics): block_m queries per program."""
    if interpreting():
        return KernelConfig(16, 16, 1, 1)
    if max(d, dv) <= 64:
        return KernelConfig(128, 32, 8, 2)
    return KernelConfig(64, 32, 8, 2)


def padded_dim(d: int) -> int:
    """Tile width for a head dim d in 1..128: the next power of two, at least 16 (tl.dot's minimum)."""
    return max(16, triton.next_power_of_2(d))


def use_atomic_dq() -> bool:
    """Whether the backward accumulates dq by fp32 atomics (fast, not bitwise reproducible) or runs
    the separate dq kernel (deterministic). ``ATOMIC_DQ`` decides when set; by default atomics on a
    GPU, except under ``torch.use_deterministic_algorithms(True)`` (Lightning's
    ``Trainer(deterministic=True)``), and never under the interpreter."""
    if ATOMIC_DQ is not None:
        return bool(ATOMIC_DQ)
    return not interpreting() and not torch.are_deterministic_algorithms_enabled()


def _dot_precision(dtype: torch.dtype) -> str:
    """tl.dot precision: FP32_DOT_PRECISION for fp32; for bf16 under the interpreter "upcast" (its
    bf16 tl.dot is wrong, see triton_fwd._dot); else irrelevant (16-bit operands)."""
    if dtype == torch.float32:
        return FP32_DOT_PRECISION
    if dtype == torch.bfloat16 and interpreting():
        return "upcast"
    return "tf32"


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------
def _launch_fwd(q, keys, values, dt, lens, causal: bool, scale: float, d: int, dv: int):
    """o [B,H,M,Dv] (q's dtype) and lse [B,H,M] (fp32) from q [B,H,M,D], knots [B,H,N+1,*], dt [B,N]
    fp32 and lens [B] int32 or None."""
    batch, heads, m, _ = q.shape
    n = keys.shape[2] - 1
    dp, dvp = padded_dim(d), padded_dim(dv)
    o = torch.empty(batch, heads, m, dv, dtype=q.dtype, device=q.device)
    lse = torch.empty(batch, heads, m, dtype=torch.float32, device=q.device)
    cfg = fwd_config(dp, dvp, causal)
    grid = (triton.cdiv(m, cfg.block_m) * batch * heads,)
    _fwd_kernel[grid](
        q, keys, values, dt, lens if lens is not None else dt, o, lse,
        *q.stride(), *keys.stride(), *values.stride(), *dt.stride(), *o.stride(),
        m, n, heads, scale,
        CAUSAL=causal, HAS_LENS=lens is not None, D=d, DP=dp, DV=dv, DVP=dvp,
        BM=cfg.block_m, BN=cfg.block_n, DOT_PREC=_dot_precision(q.dtype),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return o, lse


def _launch_bwd(do, q, keys, values, dt, lens, o, lse, causal: bool, scale: float, need_ddt: bool):
    """(dq, dkeys_left, dkeys_right, dvalues_left, dvalues_right, ddt or None).

    The *_left/*_right buffers are fp32 [B,H,N,*] indexed by interval c: the gradient of knot c
    and of knot c + 1 from the intervals of one block; the caller adds them."""
    batch, heads, m, d = q.shape
    n = keys.shape[2] - 1
    dv = values.shape[-1]
    dp, dvp = padded_dim(d), padded_dim(dv)
    dev = q.device
    f32 = torch.float32
    cfg = bwd_config(dp, dvp, causal)

    delta = torch.empty(batch, heads, m, dtype=f32, device=dev)
    pre_m = 16 if interpreting() else 64
    _bwd_preprocess[(triton.cdiv(m, pre_m) * batch * heads,)](
        o, do, delta, *o.stride(), *do.stride(), m, heads, DV=dv, DVP=dvp, BM=pre_m, num_warps=4,
    )

    dkl = torch.empty(batch, heads, n, d, dtype=f32, device=dev)
    dkr = torch.empty_like(dkl)
    dvl = torch.empty(batch, heads, n, dv, dtype=f32, device=dev)
    dvr = torch.empty_like(dvl)
    ddt_heads = torch.empty(batch, heads, n, dtype=f32, device=dev) if need_ddt else delta
    atomic = use_atomic_dq()
    dq = torch.zeros(q.shape, dtype=f32, device=dev) if atomic else torch.empty(q.shape, dtype=q.dtype, device=dev)
    prec = _dot_precision(q.dtype)
    lens_arg = lens if lens is not None else delta
    common = (*q.stride(), *keys.stride(), *values.stride(), *dt.stride(), *do.stride(), *dq.stride(),
              m, n, heads, scale)
    dims = dict(CAUSAL=causal, HAS_LENS=lens is not None, D=d, DP=dp, DV=dv, DVP=dvp, DOT_PREC=prec)

    _bwd_dkdv_kernel[(triton.cdiv(n, cfg.block_n) * batch * heads,)](
        q, keys, values, dt, lens_arg, do, lse, delta, dq, dkl, dkr, dvl, dvr, ddt_heads, *common,
        BM=cfg.block_m, BN=cfg.block_n, ATOMIC_DQ=atomic, HAS_DDT=need_ddt, **dims,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    if atomic:
        dq = dq.to(q.dtype)
    else:
        qcfg = dq_config(dp, dvp, causal)
        _bwd_dq_kernel[(triton.cdiv(m, qcfg.block_m) * batch * heads,)](
            q, keys, values, dt, lens_arg, do, lse, delta, dq, *common,
            BM=qcfg.block_m, BN=qcfg.block_n, **dims,
            num_warps=qcfg.num_warps, num_stages=qcfg.num_stages,
        )
    ddt = ddt_heads.sum(dim=1) if need_ddt else None
    return dq, dkl, dkr, dvl, dvr, ddt


def _merge_knot_grads(left: torch.Tensor, right: torch.Tensor, dtype: torch.dtype):
    """Knot gradients from the interval-indexed buffers: (d row-keys [B,H,N,*], d sink [B,H,1,*]).

    Knot 0 (sink) = left[0]; knot j = 1..N (row j-1) = right[j-1] + left[j] (left[N] is absent)."""
    rows = right
    rows[:, :, :-1] += left[:, :, 1:]
    return rows.to(dtype), left[:, :, :1].to(dtype)


# ---------------------------------------------------------------------------------------------
# autograd.Function
# ---------------------------------------------------------------------------------------------
class ContinuousAttentionTriton(torch.autograd.Function):
    """Fused forward/backward; inputs as ``continuous_attention_triton`` receives them."""

    @staticmethod
    def forward(ctx, q, k, v, k0, v0, dt, key_lengths, causal: bool, scale: float):
        keys = torch.cat([k0, k], dim=-2)          # [B, H, N+1, D]: knot 0 is the sink
        values = torch.cat([v0, v], dim=-2)
        # o is invariant to scaling one batch row's dt by a constant c (and dL/d dt = dL/d(dt/c) / c):
        # dt / max(dt) keeps the unnormalised weights cL, cR <= ~1, inside fp16 range for any dt.
        # The max is over the row's used spacings only (padding may hold anything finite, or 0).
        dt32 = dt.to(torch.float32)
        lens = None
        if key_lengths is None:
            dt_max = dt32.amax(dim=-1, keepdim=True)                          # [B, 1]
        else:
            lens = key_lengths.to(torch.int32).contiguous()
            used = torch.arange(dt.shape[-1], device=dt.device) < key_lengths[:, None]
            dt_max = torch.where(used, dt32, 0.0).amax(dim=-1, keepdim=True)
            dt_max = torch.where(dt_max > 0, dt_max, 1.0)                    # length 0: any positive
            dt32 = torch.where(used, dt32, dt_max)                           # padding: never read
        dt32 = dt32 / dt_max
        # The kernels take scale >= 0 (the row max of raw dots is then the max score): a negative
        # scale multiplies q by -1 instead (exact), and dq by -1 on the way back.
        flip = scale < 0
        qk = -q if flip else q
        o, lse = _launch_fwd(qk, keys, values, dt32, lens, causal, abs(scale), q.shape[-1], v.shape[-1])
        if any(ctx.needs_input_grad[:6]):
            ctx.save_for_backward(qk, keys, values, dt32, dt_max, lens, o, lse)
        ctx.causal, ctx.scale, ctx.flip, ctx.dt_dtype = causal, abs(scale), flip, dt.dtype
        return o

    @staticmethod
    def backward(ctx, do):
        q, keys, values, dt32, dt_max, lens, o, lse = ctx.saved_tensors
        need_ddt = ctx.needs_input_grad[5]
        dq, dkl, dkr, dvl, dvr, ddt = _launch_bwd(
            do, q, keys, values, dt32, lens, o, lse, ctx.causal, ctx.scale, need_ddt
        )
        if ctx.flip:
            dq = -dq
        dk, dk0 = _merge_knot_grads(dkl, dkr, q.dtype)
        dv, dv0 = _merge_knot_grads(dvl, dvr, q.dtype)
        if ddt is not None:
            ddt = (ddt / dt_max).to(ctx.dt_dtype)
        return dq, dk, dv, dk0, dv0, ddt, None, None, None


# ---------------------------------------------------------------------------------------------
# Public function
# ---------------------------------------------------------------------------------------------
def continuous_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k0: torch.Tensor,
    v0: torch.Tensor,
    *,
    causal: bool,
    scale: float,
    dt: torch.Tensor,
    key_lengths: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Continuous attention by the fused Triton kernels.

    Args as ``continuous_attention`` passes them: q [B,H,M,D]; k [B,H,N,D]; v [B,H,N,Dv];
    k0 [B,H,1,D]; v0 [B,H,1,Dv]; dt [B,N] (positive where used); key_lengths [B] in [0, N] or None.
    fp32/bf16/fp16 with fp32 accumulation; output [B,H,M,Dv] in q's dtype.

    Raises:
        ValueError: CPU tensors outside the interpreter, float64, or D/Dv outside 1..MAX_HEAD_DIM.
    """
    if not q.is_cuda and not interpreting():
        raise ValueError(
            f"backend='triton' needs CUDA tensors, got {q.device} (CPU runs only under Triton's interpreter: "
            "set TRITON_INTERPRET=1 before importing triton); use backend='torch' on the CPU"
        )
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(
            f"backend='triton' supports float32, bfloat16 and float16, got {q.dtype}; use backend='torch' for float64"
        )
    d, dv = q.shape[-1], v.shape[-1]
    for name, size in (("D", d), ("Dv", dv)):
        if not 1 <= size <= MAX_HEAD_DIM:
            raise ValueError(
                f"backend='triton' supports head dims 1..{MAX_HEAD_DIM}, got {name}={size}; "
                "use backend='torch' for larger heads"
            )
    return ContinuousAttentionTriton.apply(q, k, v, k0, v0, dt, key_lengths, causal, float(scale))

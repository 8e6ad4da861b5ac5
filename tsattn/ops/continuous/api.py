"""Public entry point: ``continuous_attention`` validates its inputs and dispatches to a backend."""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import cpu_kernel
from .reference import continuous_attention_reference
from .torch_impl import continuous_attention_torch

BACKENDS = ("auto", "reference", "torch", "triton", "cpu")
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# What the Triton kernel handles; "auto" falls back to the torch path for anything else.
TRITON_HEAD_DIMS = (16, 32, 64, 128)
TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _check_4d(name: str, x, like: Optional[torch.Tensor] = None) -> None:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"`{name}` must have shape [B, H, N, D] (4 dims), got shape {tuple(x.shape)}")
    if x.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"`{name}` must be float16, bfloat16, float32 or float64, got {x.dtype}")
    if like is not None:
        if x.dtype != like.dtype:
            raise ValueError(f"`{name}` has dtype {x.dtype} but `q` has {like.dtype}; cast them to one dtype")
        if x.device != like.device:
            raise ValueError(f"`{name}` is on {x.device} but `q` is on {like.device}; move them to one device")


def _expand_sink(name: str, x, shape: tuple[int, ...], q: torch.Tensor) -> torch.Tensor:
    """None -> zeros; else broadcast to ``shape`` = [B, H, 1, D] (gradients reduce back through expand)."""
    if x is None:
        return q.new_zeros(shape)
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"`{name}` must be a torch.Tensor or None, got {type(x).__name__}")
    if x.dtype != q.dtype:
        raise ValueError(f"`{name}` has dtype {x.dtype} but `q` has {q.dtype}; cast it with .to(q.dtype)")
    if x.device != q.device:
        raise ValueError(f"`{name}` is on {x.device} but `q` is on {q.device}; move it to q's device")
    try:
        return x.expand(shape)
    except RuntimeError:
        raise ValueError(
            f"`{name}` of shape {tuple(x.shape)} does not broadcast to {list(shape)} = [B, H, 1, D]; "
            "a per-head sink has shape [H, 1, D]"
        ) from None


def _expand_dt(dt, batch: int, n: int, q: torch.Tensor) -> torch.Tensor:
    """None -> ones; else a positive, finite float tensor broadcast to [B, N]."""
    if dt is None:
        return q.new_ones(batch, n)
    if not isinstance(dt, torch.Tensor):
        raise ValueError(f"`dt` must be a torch.Tensor or None, got {type(dt).__name__}")
    if not torch.is_floating_point(dt):
        raise ValueError(f"`dt` must be a floating-point tensor of knot spacings, got {dt.dtype}")
    if dt.device != q.device:
        raise ValueError(f"`dt` is on {dt.device} but `q` is on {q.device}; move it to q's device")
    try:
        dt = dt.expand(batch, n)
    except RuntimeError:
        raise ValueError(f"`dt` of shape {tuple(dt.shape)} does not broadcast to [B, N] = [{batch}, {n}]") from None
    # A data-dependent check cannot be traced: under torch.compile it is left to eager runs.
    if torch.compiler.is_compiling():
        return dt
    if not bool((dt > 0).all()) or not bool(torch.isfinite(dt).all()):
        raise ValueError("`dt` must be positive and finite everywhere (knot times strictly increasing)")
    return dt


def resolve_backend(backend: str, q: torch.Tensor, dv: Optional[int] = None) -> str:
    """Map ``backend`` to a concrete one: "auto" is "triton" for CUDA tensors of a dtype and head
    dims the kernel supports (when Triton imports), "cpu" for CPU tensors when the CPU kernel is
    built (``cpu_kernel.available``), else "torch"."""
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    dims_ok = q.shape[-1] in TRITON_HEAD_DIMS and (dv if dv is not None else q.shape[-1]) in TRITON_HEAD_DIMS
    if q.is_cuda and q.dtype in TRITON_DTYPES and dims_ok:
        try:
            import triton  # noqa: F401
        except ImportError:
            return "torch"
        return "triton"
    if not q.is_cuda and q.device.type == "cpu" and cpu_kernel.available():
        return "cpu"
    return "torch"


def continuous_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k0: Optional[torch.Tensor] = None,
    v0: Optional[torch.Tensor] = None,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    dt: Optional[torch.Tensor] = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Continuous softmax attention: keys and values piecewise linear in time, sums become integrals.

    Knot 0 is the sink (k0, v0); knot j >= 1 holds k[..., j-1, :] and v[..., j-1, :]. Query t
    integrates over [tau_0, tau_{t+1}] when ``causal`` and over [tau_0, tau_N] otherwise. In closed
    form the output is ``sum_j softmax_j(a_j + b_j) v_j`` with a_j = scale * q . k_j and
    exp(b_j) = dt_j phi2(a_{j-1} - a_j) + dt_{j+1} phi2(a_{j+1} - a_j).

    Args:
        q: [B, H, N, D] queries.
        k: [B, H, N, D] keys.
        v: [B, H, N, Dv] values (Dv may differ from D).
        k0: sink key, broadcastable to [B, H, 1, D] (e.g. a learned per-head [H, 1, D]); None = zeros.
        v0: sink value, broadcastable to [B, H, 1, Dv]; None = zeros.
        causal: decoder (True) or encoder (False) attention.
        scale: multiplies q . k; default 1 / sqrt(D), as in ``F.scaled_dot_product_attention``.
        dt: knot spacings, positive, broadcastable to [B, N]; dt[..., j] is the length of the
            interval that ends at knot j + 1 (dt[..., 0]: sink to first key). None = all ones.
        backend: "auto" (Triton on CUDA, the CPU kernel on the CPU, else torch), "torch" (pure
            PyTorch, any device), "triton", "cpu" (fused C++ kernel, built at first use) or
            "reference" (fp64).

    Returns:
        [B, H, N, Dv] in q's dtype. Gradients flow to q, k, v, k0, v0 and dt.

    Raises:
        ValueError: unknown backend, mismatched shapes/dtypes/devices, non-positive dt.
    """
    _check_4d("q", q)
    _check_4d("k", k, like=q)
    _check_4d("v", v, like=q)
    batch, heads, n, d = q.shape
    if n < 1:
        raise ValueError("`q` must hold at least one position (N >= 1)")
    if k.shape != q.shape:
        raise ValueError(f"`k` must have the shape of `q` {tuple(q.shape)} = [B, H, N, D], got {tuple(k.shape)}")
    if v.shape[:3] != q.shape[:3]:
        raise ValueError(f"`v` must have shape [B, H, N, Dv] = [{batch}, {heads}, {n}, Dv], got {tuple(v.shape)}")
    dv = v.shape[-1]
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be a bool, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif not (isinstance(scale, (int, float)) and math.isfinite(scale)):
        raise ValueError(f"`scale` must be a finite float or None, got {scale!r}")
    which = resolve_backend(backend, q, dv)
    k0 = _expand_sink("k0", k0, (batch, heads, 1, d), q)
    v0 = _expand_sink("v0", v0, (batch, heads, 1, dv), q)
    dt = _expand_dt(dt, batch, n, q)

    if which == "reference":
        out = continuous_attention_reference(q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt)
        return out.to(q.dtype)
    if which == "torch":
        return continuous_attention_torch(q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt)
    if which == "cpu":
        return cpu_kernel.continuous_attention_cpu(q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt)
    from .function import continuous_attention_triton  # imports triton lazily

    return continuous_attention_triton(q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt)

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
# What the Triton kernels handle: head dims 1..128 (zero-padded in registers to a power of two
# >= 16) in these dtypes; "auto" falls back to the torch path for anything else.
TRITON_MAX_HEAD_DIM = 128
TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


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
    """None -> ones; else a float tensor broadcast to [B, N] (its values are checked by
    ``_check_knot_values``)."""
    if dt is None:
        return q.new_ones(batch, n)
    if not isinstance(dt, torch.Tensor):
        raise ValueError(f"`dt` must be a torch.Tensor or None, got {type(dt).__name__}")
    if not torch.is_floating_point(dt):
        raise ValueError(f"`dt` must be a floating-point tensor of knot spacings, got {dt.dtype}")
    if dt.device != q.device:
        raise ValueError(f"`dt` is on {dt.device} but `q` is on {q.device}; move it to q's device")
    try:
        return dt.expand(batch, n)
    except RuntimeError:
        raise ValueError(f"`dt` of shape {tuple(dt.shape)} does not broadcast to [B, N] = [{batch}, {n}]") from None


def _check_key_lengths(key_lengths, batch: int, q: torch.Tensor) -> None:
    """Type, shape and device of ``key_lengths`` (free: no value is read)."""
    if not isinstance(key_lengths, torch.Tensor):
        raise ValueError(f"`key_lengths` must be an integer torch.Tensor [B] or None, got {type(key_lengths).__name__}")
    if key_lengths.dtype not in _INT_DTYPES:
        raise ValueError(
            f"`key_lengths` must be an integer tensor (the number of valid keys per batch row), got {key_lengths.dtype}"
        )
    if tuple(key_lengths.shape) != (batch,):
        raise ValueError(f"`key_lengths` must have shape [B] = [{batch}], got {tuple(key_lengths.shape)}")
    if key_lengths.device != q.device:
        raise ValueError(f"`key_lengths` is on {key_lengths.device} but `q` is on {q.device}; move it to q's device")


def _check_knot_values(dt: torch.Tensor, key_lengths: Optional[torch.Tensor], n: int) -> None:
    """The data-dependent checks: key_lengths in [0, N]; dt positive and finite on every used entry
    (j < key_lengths[b]; all of them without lengths). dt: [B, N]; key_lengths: [B] or None.

    They read values back to the host (one synchronisation of a GPU); ``validate=False`` skips them.
    """
    used = None
    lengths_ok = torch.ones((), dtype=torch.bool, device=dt.device)
    if key_lengths is not None:
        lengths_ok = ((key_lengths >= 0) & (key_lengths <= n)).all()
        used = torch.arange(n, device=dt.device) < key_lengths[:, None]       # [B, N]
    good = (dt > 0) & torch.isfinite(dt)
    dt_ok = (good | ~used).all() if used is not None else good.all()
    lengths_ok, dt_ok = torch.stack([lengths_ok, dt_ok]).tolist()            # the one host read
    if not lengths_ok:
        raise ValueError(
            f"`key_lengths` must lie in [0, N] = [0, {n}] (the number of valid keys of each batch row), got values "
            f"from {int(key_lengths.min())} to {int(key_lengths.max())}; clamp them or fix how they are counted"
        )
    if not dt_ok:
        bad = (~good if used is None else ~good & used).nonzero()[0].tolist()
        where = "" if used is None else " within key_lengths"
        raise ValueError(
            f"`dt` must be positive and finite on every used knot{where} (knot times strictly increasing); "
            f"dt[{bad[0]}, {bad[1]}] = {dt[bad[0], bad[1]].item()}. Merge or drop repeated times, or mark "
            "padding with `key_lengths`"
        )


def resolve_backend(backend: str, q: torch.Tensor, dv: Optional[int] = None) -> str:
    """Map ``backend`` to a concrete one: "auto" is "triton" for CUDA tensors of a dtype the kernels
    support with head dims D, Dv <= 128 (when Triton imports), "cpu" for CPU tensors when the CPU
    kernel is built (``cpu_kernel.available``), else "torch"."""
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r}")
    if backend != "auto":
        return backend
    d = q.shape[-1]
    dv = d if dv is None else dv
    dims_ok = 1 <= d <= TRITON_MAX_HEAD_DIM and 1 <= dv <= TRITON_MAX_HEAD_DIM
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
    key_lengths: Optional[torch.Tensor] = None,
    backend: str = "auto",
    validate: bool = True,
) -> torch.Tensor:
    """Continuous softmax attention: keys and values piecewise linear in time, sums become integrals.

    Knot 0 is the sink (k0, v0); knot j >= 1 holds k[..., j-1, :] and v[..., j-1, :]. Every query
    integrates over [tau_0, tau_L] with L = key_lengths[b] (N without lengths): M queries may read
    N keys (cross-attention, e.g. forecast queries reading history knots). With ``causal`` (M == N)
    query t integrates over [tau_0, tau_min(t+1, L)]. In closed form the output is
    ``sum_j softmax_j(a_j + b_j) v_j`` with a_j = scale * q . k_j and
    exp(b_j) = dt_j phi2(a_{j-1} - a_j) + dt_{j+1} phi2(a_{j+1} - a_j).

    Args:
        q: [B, H, M, D] queries.
        k: [B, H, N, D] keys.
        v: [B, H, N, Dv] values (Dv may differ from D).
        k0: sink key, broadcastable to [B, H, 1, D] (e.g. a learned per-head [H, 1, D]); None = zeros.
        v0: sink value, broadcastable to [B, H, 1, Dv]; None = zeros.
        causal: decoder (True, needs M == N) or encoder / cross (False) attention.
        scale: multiplies q . k; default 1 / sqrt(D), as in ``F.scaled_dot_product_attention``.
        dt: knot spacings, broadcastable to [B, N]; dt[..., j] is the length of the interval that
            ends at knot j + 1 (dt[..., 0]: sink to first key). Positive where used. None = all ones.
        key_lengths: [B] integers in [0, N], or None (= N): batch row b holds only its first
            key_lengths[b] keys. The rest (padding: any finite values, dt may be 0) is ignored
            exactly, as if the row were that long, and gets zero gradient. Length 0: every query of
            the row returns v0 (the sink alone).
        backend: "auto" (Triton on CUDA, the CPU kernel on the CPU, else torch), "torch" (pure
            PyTorch, any device), "triton", "cpu" (fused C++ kernel, built at first use) or
            "reference" (fp64).
        validate: check the values of dt and key_lengths (above). This reads them back to the host,
            i.e. synchronises a GPU; pass False where the caller guarantees them (shape, dtype and
            device checks always run, they are free). Under torch.compile the value checks are
            skipped.

    Returns:
        [B, H, M, Dv] in q's dtype. Gradients flow to q, k, v, k0, v0 and dt.

    Raises:
        ValueError: unknown backend, mismatched shapes/dtypes/devices, causal with M != N, and (with
            ``validate``) non-positive or non-finite dt on a used knot or key_lengths outside [0, N].
    """
    _check_4d("q", q)
    _check_4d("k", k, like=q)
    _check_4d("v", v, like=q)
    batch, heads, m, d = q.shape
    n = k.shape[-2]
    if m < 1:
        raise ValueError("`q` must hold at least one query (M >= 1)")
    if k.shape[:2] != q.shape[:2] or k.shape[-1] != d:
        raise ValueError(
            f"`k` must have shape [B, H, N, D] = [{batch}, {heads}, N, {d}] (B, H and D of `q`), got {tuple(k.shape)}"
        )
    if v.shape[:3] != k.shape[:3]:
        raise ValueError(f"`v` must have shape [B, H, N, Dv] = [{batch}, {heads}, {n}, Dv] (like `k`), "
                         f"got {tuple(v.shape)}")
    dv = v.shape[-1]
    if not isinstance(causal, bool):
        raise ValueError(f"`causal` must be a bool, got {causal!r}")
    if causal and m != n:
        raise ValueError(
            f"causal attention needs as many queries as keys (query t is knot t + 1), got M = {m} queries and "
            f"N = {n} keys; use causal=False for cross-attention (and key_lengths for ragged rows)"
        )
    if not isinstance(validate, bool):
        raise ValueError(f"`validate` must be a bool, got {validate!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif not (isinstance(scale, (int, float)) and math.isfinite(scale)):
        raise ValueError(f"`scale` must be a finite float or None, got {scale!r}")
    which = resolve_backend(backend, q, dv)
    k0 = _expand_sink("k0", k0, (batch, heads, 1, d), q)
    v0 = _expand_sink("v0", v0, (batch, heads, 1, dv), q)
    dt = _expand_dt(dt, batch, n, q)
    if key_lengths is not None:
        _check_key_lengths(key_lengths, batch, q)
    # Data-dependent checks cannot be traced: under torch.compile they are left to eager runs.
    if validate and not torch.compiler.is_compiling():
        _check_knot_values(dt, key_lengths, n)
    if key_lengths is not None:
        key_lengths = key_lengths.long().clamp(0, n)   # unvalidated lengths: out-of-range ones clamped
    if n == 0:
        # No keys at all: every row has length 0. One zero knot of padding lets every backend take
        # its length-0 path (the padding is never read; k and v keep their place in the graph).
        k = torch.cat([k, k.new_zeros(batch, heads, 1, d)], dim=-2)
        v = torch.cat([v, v.new_zeros(batch, heads, 1, dv)], dim=-2)
        dt = torch.cat([dt, dt.new_ones(batch, 1)], dim=-1)
        key_lengths = torch.zeros(batch, dtype=torch.int64, device=q.device)

    if which == "reference":
        out = continuous_attention_reference(
            q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt, key_lengths=key_lengths
        )
        return out.to(q.dtype)
    if which == "torch":
        return continuous_attention_torch(
            q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt, key_lengths=key_lengths
        )
    if which == "cpu":
        return cpu_kernel.continuous_attention_cpu(
            q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt, key_lengths=key_lengths
        )
    from .function import continuous_attention_triton  # imports triton lazily

    return continuous_attention_triton(q, k, v, k0, v0, causal=causal, scale=float(scale), dt=dt,
                                       key_lengths=key_lengths)

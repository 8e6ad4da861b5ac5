"""Fused CPU kernel of continuous attention: ``backend="cpu"`` (and ``"auto"`` for CPU tensors).

The kernel (``cpu_kernel.cpp``) computes the segment form of the torch path tile by tile (score
tiles stay in L1; a causal query tile reads only the knots it sees) with an online softmax that
saves O and the log-sum-exp, and the analytic backward that recomputes the weights. It is built at
first use by ``cpu_build`` into the user cache (a few seconds once per source, compiler and CPU)
and called through ctypes.

- Threads: ``torch.get_num_threads()`` threads (the calling one and a small pool; ctypes releases
  the GIL during the call) share the (batch, head) groups dynamically, taking blocks of groups from
  one atomic counter, so a thread the OS delays (a busy machine, torch's OpenMP workers still
  spinning after the previous op) only does less of the work. No OpenMP inside the kernel.
- torch.compile: the forward and backward are ``torch.library`` custom ops with fake (meta)
  implementations and a registered autograd formula, so a compiled model sees one opaque node
  (no graph break, nothing traced into, nothing for inductor to compile).
- Precision: fp32 inputs in fp32, fp64 in fp64; bf16/fp16 are computed in fp32 and returned in
  their own dtype. Inputs may be strided views (the kernel gathers its tiles itself).
- Off switch: ``TSATTN_CPU_KERNEL=0`` (then ``"auto"`` uses the torch path). When no compiler is
  found or the build fails, one warning says why and the torch path is used instead.
"""
from __future__ import annotations

import ctypes
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import torch
from torch import Tensor

from ...user_cache import cache_dir
from . import cpu_build
from .torch_impl import continuous_attention_torch

ABI_VERSION = 2
# Blocks per thread handed out by the kernel's counter: small enough to balance, large enough
# that taking one costs nothing.
BLOCKS_PER_THREAD = 16
ENV_SWITCH = "TSATTN_CPU_KERNEL"
_COMPUTE_DTYPES = (torch.float32, torch.float64)


class _KernelArgs(ctypes.Structure):
    """Mirrors ``struct TsattnArgs`` in cpu_kernel.cpp (strides in elements)."""

    _fields_ = [
        ("batch", ctypes.c_int64), ("heads", ctypes.c_int64), ("m", ctypes.c_int64), ("n", ctypes.c_int64),
        ("d", ctypes.c_int64), ("dv", ctypes.c_int64), ("causal", ctypes.c_int64), ("scale", ctypes.c_double),
        ("q", ctypes.c_void_p), ("q_stride", ctypes.c_int64 * 4),
        ("k", ctypes.c_void_p), ("k_stride", ctypes.c_int64 * 4),
        ("v", ctypes.c_void_p), ("v_stride", ctypes.c_int64 * 4),
        ("k0", ctypes.c_void_p), ("k0_stride", ctypes.c_int64 * 4),
        ("v0", ctypes.c_void_p), ("v0_stride", ctypes.c_int64 * 4),
        ("dt", ctypes.c_void_p), ("dt_stride", ctypes.c_int64 * 2),
        ("lengths", ctypes.c_void_p), ("lengths_stride", ctypes.c_int64),
        ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
        ("dout", ctypes.c_void_p), ("dout_stride", ctypes.c_int64 * 4),
        ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dvalues", ctypes.c_void_p),
        ("dk0", ctypes.c_void_p), ("dv0", ctypes.c_void_p), ("ddt", ctypes.c_void_p),
    ]


# ------------------------------------------------------------------------------------------------
# Building and loading (once per process)
# ------------------------------------------------------------------------------------------------
_LIBRARY: dict[str, Optional[ctypes.CDLL]] = {}
_LIBRARY_LOCK = threading.Lock()
_ENTRY_POINTS = ("tsattn_cpu_forward_f32", "tsattn_cpu_forward_f64", "tsattn_cpu_backward_f32",
                 "tsattn_cpu_backward_f64")


def kernel_enabled() -> bool:
    """False when ``TSATTN_CPU_KERNEL`` is 0 / false / off / no."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "off", "no")


def _bind(lib: ctypes.CDLL) -> ctypes.CDLL:
    lib.tsattn_cpu_abi_version.restype = ctypes.c_int
    lib.tsattn_cpu_args_size.restype = ctypes.c_int64
    if lib.tsattn_cpu_abi_version() != ABI_VERSION or lib.tsattn_cpu_args_size() != ctypes.sizeof(_KernelArgs):
        raise cpu_build.KernelBuildError("the compiled kernel does not match cpu_kernel.py (ABI version or layout)")
    for name in _ENTRY_POINTS:
        fn = getattr(lib, name)
        fn.argtypes = [ctypes.POINTER(_KernelArgs), ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
        fn.restype = ctypes.c_int
    return lib


def load_library() -> Optional[ctypes.CDLL]:
    """The kernel library, built on the first call; None (after one warning) if it cannot be built."""
    if "lib" in _LIBRARY:
        return _LIBRARY["lib"]
    with _LIBRARY_LOCK:
        if "lib" not in _LIBRARY:
            try:
                lib = _bind(cpu_build.load(cpu_build.build(cache_dir())))
            except Exception as exc:  # noqa: BLE001 - whatever stops the build, the torch path runs instead
                warnings.warn(
                    f"tsattn: the CPU kernel of continuous attention could not be built, so the slower PyTorch "
                    f"path is used instead. Reason: {exc}. Install a C++ compiler (g++ or clang++, or point CXX "
                    f"at one) and make the cache folder writable (TSATTN_CACHE_DIR), or set {ENV_SWITCH}=0 to "
                    "use the PyTorch path without this warning.",
                    RuntimeWarning,
                    stacklevel=3,
                )
                lib = None
            _LIBRARY["lib"] = lib
    return _LIBRARY["lib"]


@torch.compiler.assume_constant_result
def available() -> bool:
    """True when the kernel is enabled and built (builds it on the first call). A constant to
    torch.compile: evaluated once while tracing, not traced into."""
    return kernel_enabled() and load_library() is not None


# ------------------------------------------------------------------------------------------------
# Threads
# ------------------------------------------------------------------------------------------------
_POOL: dict[str, object] = {"executor": None, "workers": 0}
_POOL_LOCK = threading.Lock()


def _forget_pool() -> None:
    # A forked child (e.g. a DataLoader worker) has none of the parent's threads.
    _POOL["executor"], _POOL["workers"] = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers: int) -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if _POOL["executor"] is None or _POOL["workers"] < workers:
            old = _POOL["executor"]
            _POOL["executor"] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tsattn-cpu-kernel")
            _POOL["workers"] = workers
            if old is not None:
                old.shutdown(wait=False)   # lets running calls finish
        return _POOL["executor"]  # type: ignore[return-value]


def run_on_threads(fn, args: _KernelArgs, groups: int) -> None:
    """Run the kernel entry ``fn`` on ``torch.get_num_threads()`` threads (the caller and pool
    threads), which take blocks of groups from one shared counter until all ``groups`` are done."""
    threads = max(1, min(torch.get_num_threads(), groups))
    block = max(1, -(-groups // (threads * BLOCKS_PER_THREAD)))
    next_group = ctypes.c_int64(0)
    ref, counter = ctypes.byref(args), ctypes.byref(next_group)
    if threads == 1:
        codes = [fn(ref, counter, block)]
    else:
        pool = _executor(threads - 1)
        futures = [pool.submit(fn, ref, counter, block) for _ in range(threads - 1)]
        codes = [fn(ref, counter, block)] + [f.result() for f in futures]
    if any(codes):
        raise MemoryError("the CPU kernel of continuous attention could not allocate its workspace")


# ------------------------------------------------------------------------------------------------
# Custom ops
# ------------------------------------------------------------------------------------------------
def _ptr(x: Optional[Tensor]) -> Optional[int]:
    return None if x is None else x.data_ptr()


def _strides(x: Tensor, n: int):
    return (ctypes.c_int64 * n)(*x.stride())


def _kernel_args(q, k, v, k0, v0, dt, lengths, causal: bool, scale: float) -> _KernelArgs:
    b, h, m, d = q.shape
    args = _KernelArgs()
    args.batch, args.heads, args.m, args.n, args.d, args.dv = b, h, m, k.shape[2], d, v.shape[3]
    args.causal, args.scale = int(causal), float(scale)
    for name, x in (("q", q), ("k", k), ("v", v), ("k0", k0), ("v0", v0)):
        setattr(args, name, _ptr(x))
        setattr(args, name + "_stride", _strides(x, 4))
    args.dt, args.dt_stride = _ptr(dt), _strides(dt, 2)
    if lengths is not None:
        args.lengths, args.lengths_stride = _ptr(lengths), lengths.stride(0)
    return args


def _check_inputs(q, k, v, k0, v0, dt, lengths) -> None:
    for name, x in (("q", q), ("k", k), ("v", v), ("k0", k0), ("v0", v0), ("dt", dt)):
        if x.device.type != "cpu" or x.dtype != q.dtype or x.dtype not in _COMPUTE_DTYPES:
            raise ValueError(
                f"the CPU kernel takes CPU tensors of one dtype, float32 or float64; `{name}` is {x.dtype} on "
                f"{x.device} (q: {q.dtype})"
            )
    if lengths is not None and (lengths.dtype != torch.int64 or lengths.device.type != "cpu"):
        raise ValueError(f"the CPU kernel takes key lengths as an int64 CPU tensor [B], got {lengths.dtype}")


def _entry(lib: ctypes.CDLL, direction: str, dtype: torch.dtype):
    return getattr(lib, f"tsattn_cpu_{direction}_{'f64' if dtype == torch.float64 else 'f32'}")


@torch.library.custom_op("tsattn::continuous_attention_cpu_fwd", mutates_args=(), device_types="cpu")
def continuous_attention_cpu_fwd(
    q: Tensor, k: Tensor, v: Tensor, k0: Tensor, v0: Tensor, dt: Tensor, lengths: Optional[Tensor],
    causal: bool, scale: float,
) -> tuple[Tensor, Tensor]:
    """o [B, H, M, Dv] and lse [B, H, M] from q [B,H,M,D], k [B,H,N,D], v [B,H,N,Dv], k0 [B,H,1,D],
    v0 [B,H,1,Dv], dt [B,N] and lengths [B] int64 or None (all fp32 or all fp64, any strides)."""
    _check_inputs(q, k, v, k0, v0, dt, lengths)
    b, h, m, _ = q.shape
    o = q.new_empty(b, h, m, v.shape[3])
    lse = q.new_empty(b, h, m)
    if lse.numel() == 0:
        return o, lse
    lib = load_library()
    if lib is None:
        raise RuntimeError("the CPU kernel of continuous attention is not built (see the earlier warning)")
    args = _kernel_args(q, k, v, k0, v0, dt, lengths, causal, scale)
    args.o, args.lse = o.data_ptr(), lse.data_ptr()
    run_on_threads(_entry(lib, "forward", q.dtype), args, b * h)
    return o, lse


@continuous_attention_cpu_fwd.register_fake
def _fwd_fake(q, k, v, k0, v0, dt, lengths, causal, scale):
    b, h, m, _ = q.shape
    return q.new_empty(b, h, m, v.shape[3]), q.new_empty(b, h, m)


@torch.library.custom_op("tsattn::continuous_attention_cpu_bwd", mutates_args=(), device_types="cpu")
def continuous_attention_cpu_bwd(
    grad_o: Tensor, q: Tensor, k: Tensor, v: Tensor, k0: Tensor, v0: Tensor, dt: Tensor,
    lengths: Optional[Tensor], o: Tensor, lse: Tensor, causal: bool, scale: float,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dq, dk, dv, dk0, dv0, ddt per head [B, H, N]) from dO [B,H,M,Dv] and the forward's o, lse."""
    _check_inputs(q, k, v, k0, v0, dt, lengths)
    b, h, m, d = q.shape
    n, dv = k.shape[2], v.shape[3]
    grads = (q.new_empty(b, h, m, d), q.new_empty(b, h, n, d), q.new_empty(b, h, n, dv),
             q.new_empty(b, h, 1, d), q.new_empty(b, h, 1, dv), q.new_empty(b, h, n))
    if b * h == 0:
        return grads
    lib = load_library()
    if lib is None:
        raise RuntimeError("the CPU kernel of continuous attention is not built (see the earlier warning)")
    grad_o = grad_o.to(q.dtype)
    o, lse = o.contiguous(), lse.contiguous()
    args = _kernel_args(q, k, v, k0, v0, dt, lengths, causal, scale)
    args.o, args.lse = o.data_ptr(), lse.data_ptr()
    args.dout, args.dout_stride = grad_o.data_ptr(), _strides(grad_o, 4)
    args.dq, args.dk, args.dvalues, args.dk0, args.dv0, args.ddt = (x.data_ptr() for x in grads)
    run_on_threads(_entry(lib, "backward", q.dtype), args, b * h)
    return grads


@continuous_attention_cpu_bwd.register_fake
def _bwd_fake(grad_o, q, k, v, k0, v0, dt, lengths, o, lse, causal, scale):
    b, h, m, d = q.shape
    n, dv = k.shape[2], v.shape[3]
    return (q.new_empty(b, h, m, d), q.new_empty(b, h, n, d), q.new_empty(b, h, n, dv),
            q.new_empty(b, h, 1, d), q.new_empty(b, h, 1, dv), q.new_empty(b, h, n))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, k0, v0, dt, lengths, causal, scale = inputs
    o, lse = output
    ctx.save_for_backward(q, k, v, k0, v0, dt, lengths, o, lse)
    ctx.causal, ctx.scale = causal, scale
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_o: Tensor, grad_lse: Optional[Tensor]):
    q, k, v, k0, v0, dt, lengths, o, lse = ctx.saved_tensors
    dq, dk, dv, dk0, dv0, ddt = continuous_attention_cpu_bwd(
        grad_o, q, k, v, k0, v0, dt, lengths, o, lse, ctx.causal, ctx.scale
    )
    ddt = ddt.sum(dim=1) if ctx.needs_input_grad[5] else None
    return dq, dk, dv, dk0, dv0, ddt, None, None, None


torch.library.register_autograd(
    "tsattn::continuous_attention_cpu_fwd", _backward, setup_context=_setup_context
)


# ------------------------------------------------------------------------------------------------
# Entry point
# ------------------------------------------------------------------------------------------------
def continuous_attention_cpu(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    k0: Tensor,
    v0: Tensor,
    *,
    causal: bool,
    scale: float,
    dt: Tensor,
    key_lengths: Optional[Tensor] = None,
) -> Tensor:
    """Continuous attention by the fused CPU kernel, with the arguments ``continuous_attention``
    passes: q [B,H,M,D], k [B,H,N,D], v [B,H,N,Dv], expanded k0 [B,H,1,D], v0 [B,H,1,Dv], dt [B,N]
    and key_lengths [B] (integers in [0, N]) or None -> [B,H,M,Dv] in q's dtype.

    Falls back to the torch path (with one warning) when the kernel is switched off or cannot be built.

    Raises:
        ValueError: tensors not on the CPU.
    """
    if q.device.type != "cpu":
        raise ValueError(f"backend='cpu' needs CPU tensors, got {q.device}; use backend='auto' (or 'triton' on CUDA)")
    if not available():
        if not kernel_enabled() and not torch.compiler.is_compiling():
            _warn_once(f"backend='cpu' was asked for but {ENV_SWITCH}=0 switches the kernel off; using the "
                       "PyTorch path")
        extra = {} if key_lengths is None else {"key_lengths": key_lengths}
        return continuous_attention_torch(q, k, v, k0, v0, causal=causal, scale=scale, dt=dt, **extra)
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    qc, kc, vc, k0c, v0c, dtc = (x if x.dtype == compute else x.to(compute) for x in (q, k, v, k0, v0, dt))
    # unchecked lengths (validate=False) are clamped to [0, N], as the other backends do: never read past N
    lengths = None if key_lengths is None else key_lengths.to(torch.int64).clamp(0, k.shape[2])
    o, _ = continuous_attention_cpu_fwd(qc, kc, vc, k0c, v0c, dtc, lengths, causal, float(scale))
    return o.to(q.dtype)


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)

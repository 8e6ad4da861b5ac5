"""The Triton backend against the fp64 reference: o, dq, dk, dv, dk0, dv0 and d dt.

On CPU these run under Triton's interpreter (tests/conftest.py sets TRITON_INTERPRET=1 before
anything imports triton), which is ~1000x slower than eager torch: shapes are small and odd, and
the cases cover every pair of (N, D, causal, sink, dt) values rather than their full product, plus
a few cases of cross-attention (M != N), ragged rows (key_lengths) and small heads (D = 4, 8).
One more test compiles the kernels for sm_90 (no GPU needed) so that what the interpreter accepts
but a GPU compiler would not (tl.dot below 16, non-power-of-two blocks) is caught here too.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

triton = pytest.importorskip("triton")

from tsattn import continuous_attention  # noqa: E402
from tsattn.ops.continuous import function as tfn  # noqa: E402

F64 = torch.float64
if tfn.interpreting():
    DEVICE = "cpu"
elif torch.cuda.is_available():
    DEVICE = "cuda"
else:
    pytest.skip("Triton kernels need a CUDA GPU or TRITON_INTERPRET=1", allow_module_level=True)

NAMES = ("o", "dq", "dk", "dv", "dk0", "dv0", "ddt")


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref||, with ||ref|| floored at an RMS of 0.01 per element.

    The floor only matters where a gradient is identically zero in exact arithmetic (d dt at
    N = 1, where o does not depend on dt; dq and dk at N = 1 with the "first" sink, where both
    knots coincide): there the check becomes an absolute one, RMS error <= 1e-6 at tol 1e-4.
    Every other reference gradient here has an RMS above 0.08."""
    floor = 1e-2 * ref.numel() ** 0.5
    return ((x.to(F64) - ref.to(F64)).norm() / ref.to(F64).norm().clamp_min(floor)).item()


def make_inputs(b, h, n, d, dv, *, sink, irregular, seed, score_scale=1.0, dtype=torch.float32, m=None):
    """Leaves in ``dtype`` (rounded once, so the reference sees the same numbers) with scores
    a = scale q.k of O(score_scale): std ~2 by default. q has ``m`` rows (default n)."""
    g = torch.Generator().manual_seed(seed)
    q = 2.0 * score_scale * torch.randn(b, h, n if m is None else m, d, generator=g)
    k = torch.randn(b, h, n, d, generator=g)
    v = torch.randn(b, h, n, dv, generator=g)
    leaves = dict(q=q, k=k, v=v)
    if sink == "learned":  # per-head parameters [H, 1, D], broadcast over the batch
        leaves["k0"] = torch.randn(h, 1, d, generator=g)
        leaves["v0"] = torch.randn(h, 1, dv, generator=g)
    if irregular:
        leaves["dt"] = 0.1 + 2.0 * torch.rand(b, n, generator=g)
    return {key: t.to(dtype).to(DEVICE).requires_grad_() for key, t in leaves.items()}


def run(leaves, sink, causal, backend, go, compute=None, key_lengths=None):
    """Output and gradients {name: tensor} (dk0/dv0 only for learned sinks, ddt only with dt)."""
    x = {key: (t.to(compute) if compute is not None else t) for key, t in leaves.items()}
    k0, v0 = x.get("k0"), x.get("v0")
    if sink == "first":  # the sink is a view of the first knot: its gradient lands in dk/dv
        k0, v0 = x["k"][..., :1, :], x["v"][..., :1, :]
    o = continuous_attention(x["q"], x["k"], x["v"], k0, v0, causal=causal, dt=x.get("dt"), key_lengths=key_lengths,
                             backend=backend)
    grads = torch.autograd.grad(o, list(leaves.values()), go.to(o.dtype))
    names = {"q": "dq", "k": "dk", "v": "dv", "k0": "dk0", "v0": "dv0", "dt": "ddt"}
    return {"o": o, **{names[key]: gr for key, gr in zip(leaves, grads)}}


def check_against_reference(n, d, dv, causal, sink, irregular, *, seed, tol, b=2, h=2, score_scale=1.0,
                            dtype=torch.float32, m=None, lengths=None):
    """Triton vs the fp64 reference on the same leaves: o and every gradient within ``tol``.
    Returns (errors, Triton results, leaves, key_lengths)."""
    leaves = make_inputs(b, h, n, d, dv, sink=sink, irregular=irregular, seed=seed, score_scale=score_scale,
                         dtype=dtype, m=m)
    m = n if m is None else m
    key_lengths = None if lengths is None else torch.tensor(lengths, device=DEVICE)
    go = torch.randn(b, h, m, dv, generator=torch.Generator().manual_seed(seed + 1)).to(DEVICE)
    got = run(leaves, sink, causal, "triton", go, key_lengths=key_lengths)
    ref = run(leaves, sink, causal, "reference", go, compute=F64, key_lengths=key_lengths)
    assert got["o"].dtype == dtype and got["o"].shape == (b, h, m, dv)
    errors = {}
    for name in NAMES:
        if name in ref:
            assert got[name].shape == ref[name].shape and got[name].dtype == leaves_dtype(name, leaves)
            assert torch.isfinite(got[name]).all(), name
            errors[name] = rel_err(got[name], ref[name])
    bad = {name: err for name, err in errors.items() if not err <= tol}
    assert not bad, f"relative errors above {tol:g}: {bad} (all: {errors})"
    return errors, got, leaves, key_lengths


def leaves_dtype(name, leaves):
    key = {"o": "q", "dq": "q", "dk": "k", "dv": "v", "dk0": "k0", "dv0": "v0", "ddt": "dt"}[name]
    return leaves[key].dtype


# (n, d, dv, causal, sink, irregular): every pair of values of the five factors appears at least once
PAIRWISE = [
    (1, 16, 16, False, "zeros", False),
    (1, 32, 32, True, "learned", True),
    (1, 16, 16, True, "first", True),
    (17, 16, 16, False, "learned", True),
    (17, 32, 32, True, "first", False),
    (17, 16, 16, True, "zeros", True),
    (63, 32, 32, False, "first", True),
    (63, 16, 32, True, "learned", False),   # Dv != D
    (63, 32, 32, True, "zeros", True),
    (130, 16, 16, True, "first", True),
    (130, 32, 32, False, "zeros", False),
    (130, 32, 16, True, "learned", True),   # Dv != D
]


def _case_id(case):
    n, d, dv, causal, sink, irregular = case
    return f"n{n}-d{d}x{dv}-{'causal' if causal else 'bidir'}-{sink}-{'dt' if irregular else 'unit'}"


@pytest.mark.parametrize("case", PAIRWISE, ids=[_case_id(c) for c in PAIRWISE])
def test_fp32_matches_reference(case):
    n, d, dv, causal, sink, irregular = case
    check_against_reference(n, d, dv, causal, sink, irregular, seed=n * 7 + d, tol=1e-4)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_large_scores_use_the_closed_forms(causal):
    """|a| up to ~100, neighbour differences mostly far outside the series radius."""
    check_against_reference(63, 16, 16, causal, "learned", True, seed=3, tol=1e-4, score_scale=12.0)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_atomic_dq_path(monkeypatch, causal):
    """dq accumulated by fp32 atomics inside the dK/dV kernel (the GPU default)."""
    monkeypatch.setattr(tfn, "ATOMIC_DQ", True)
    check_against_reference(63, 16, 16, causal, "learned", True, seed=5, tol=1e-4)


@pytest.mark.parametrize("blocks", [(32, 16), (16, 32)], ids=["bm32-bn16", "bm16-bn32"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_unequal_block_shapes(monkeypatch, blocks, causal):
    """The GPU table uses block_m != block_n: the masked/unmasked loop bounds must hold for both."""
    cfg = tfn.KernelConfig(*blocks, 1, 1)
    for name in ("fwd_config", "bwd_config", "dq_config"):
        monkeypatch.setattr(tfn, name, lambda d, dv, causal, cfg=cfg: cfg)
    monkeypatch.setattr(tfn, "ATOMIC_DQ", causal)   # both dq paths
    check_against_reference(70, 16, 16, causal, "learned", True, seed=11, tol=1e-4)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 5e-3), (torch.bfloat16, 3e-2)], ids=["fp16", "bf16"])
def test_half_precision_inputs_accumulate_in_fp32(dtype, tol):
    check_against_reference(63, 32, 32, True, "learned", True, seed=13, tol=tol, dtype=dtype)


# ---------------------------------------------------------------- cross-attention, ragged rows, head dims

# (m, n, d, dv, causal, lengths, irregular), B = 2: M != N at odd sizes from {1, 17, 63, 130}, with
# and without key_lengths (0 and full lengths among them), head dims 4 and 8 (the shipped models'
# sizes, zero-padded to 16 in the kernels) and Dv != D; causal (M == N) with ragged rows. At N = 1
# o does not depend on dt (one interval): unit spacing there, d dt is checked elsewhere.
CROSS = [
    (17, 63, 4, 4, False, None, True),
    (63, 17, 8, 8, False, [17, 5], True),
    (1, 130, 8, 4, False, [130, 77], True),
    (130, 1, 16, 16, False, [1, 0], False),
    (130, 17, 4, 8, False, [0, 16], True),
    (63, 63, 8, 8, True, [0, 30], True),
    (17, 17, 4, 16, True, [17, 5], True),
]


def _cross_id(case):
    m, n, d, dv, causal, lengths, irregular = case
    return (f"m{m}-n{n}-d{d}x{dv}-{'causal' if causal else 'bidir'}-{'ragged' if lengths else 'full'}"
            f"-{'dt' if irregular else 'unit'}")


def check_ragged_rows(got, leaves, key_lengths):
    """Padding gets exactly zero gradient; a row of length 0 returns v0 exactly."""
    if key_lengths is None:
        return
    h, m, dv = got["o"].shape[1:]
    for b, length in enumerate(key_lengths.tolist()):
        for name in ("dk", "dv"):
            assert torch.equal(got[name][b, :, length:], torch.zeros_like(got[name][b, :, length:])), name
        if "ddt" in got:
            assert torch.equal(got["ddt"][b, length:], torch.zeros_like(got["ddt"][b, length:]))
        if length == 0:
            v0 = leaves["v0"] if "v0" in leaves else torch.zeros(h, 1, dv, device=DEVICE)
            assert torch.equal(got["o"][b], v0.detach().expand(h, m, dv).to(got["o"].dtype))


@pytest.mark.parametrize("case", CROSS, ids=[_cross_id(c) for c in CROSS])
def test_cross_ragged_and_small_heads_match_reference(case):
    m, n, d, dv, causal, lengths, irregular = case
    _, got, leaves, key_lengths = check_against_reference(n, d, dv, causal, "learned", irregular, seed=m + 3 * n + d,
                                                          tol=1e-4, m=m, lengths=lengths)
    check_ragged_rows(got, leaves, key_lengths)


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_atomic_dq_with_ragged_rows_and_small_heads(monkeypatch, causal):
    monkeypatch.setattr(tfn, "ATOMIC_DQ", True)
    m = 33 if causal else 19
    _, got, leaves, key_lengths = check_against_reference(33, 8, 4, causal, "learned", True, seed=7, tol=1e-4,
                                                          m=m, lengths=[20, 0])
    check_ragged_rows(got, leaves, key_lengths)


def test_unit_spacings_and_zero_sink_with_ragged_rows():
    """No dt and no sink given (ones, zeros): the length-0 row returns zeros."""
    _, got, leaves, key_lengths = check_against_reference(40, 8, 8, False, "zeros", False, seed=9, tol=1e-4, m=9,
                                                          lengths=[0, 40])
    check_ragged_rows(got, leaves, key_lengths)


@pytest.mark.parametrize("m,n,d,dv,causal,lengths", [(5, 9, 1, 100, False, [9, 2]), (9, 9, 48, 3, True, None),
                                                     (7, 5, 128, 128, False, [3, 5])],
                         ids=["d1x100", "d48x3", "d128x128"])
def test_other_head_dims(m, n, d, dv, causal, lengths):
    """Head dims off the power-of-two grid (padded to 16, 64 and 128 wide tiles) and the largest."""
    check_against_reference(n, d, dv, causal, "learned", True, seed=d + dv, tol=1e-4, m=m, lengths=lengths)


def test_no_keys_at_all_returns_the_sink_value():
    q = torch.randn(2, 2, 5, 8, device=DEVICE, requires_grad=True)
    k = torch.randn(2, 2, 0, 8, device=DEVICE, requires_grad=True)
    v = torch.randn(2, 2, 0, 4, device=DEVICE, requires_grad=True)
    v0 = torch.randn(2, 1, 4, device=DEVICE, requires_grad=True)
    o = continuous_attention(q, k, v, None, v0, backend="triton")
    assert torch.equal(o, v0.detach().expand(2, 2, 5, 4))
    dq, dv0 = torch.autograd.grad(o, [q, v0], torch.ones_like(o))
    assert torch.equal(dq, torch.zeros_like(dq)) and torch.equal(dv0, torch.full_like(dv0, 10.0))   # 2 rows x 5


def test_ragged_rows_behave_as_if_truncated():
    """Row b of a padded batch = a separate call on its first L_b keys (o and every gradient)."""
    leaves = make_inputs(3, 2, 40, 8, 8, sink="learned", irregular=True, seed=19, m=17)
    lengths = [40, 23, 1]
    go = torch.randn(3, 2, 17, 8, generator=torch.Generator().manual_seed(6)).to(DEVICE)
    padded = run(leaves, "learned", False, "triton", go, key_lengths=torch.tensor(lengths, device=DEVICE))
    for b, length in enumerate(lengths):
        row = {key: (t[b : b + 1] if key in ("q", "k", "v", "dt") else t).detach() for key, t in leaves.items()}
        row["k"], row["v"], row["dt"] = row["k"][:, :, :length], row["v"][:, :, :length], row["dt"][:, :length]
        alone = run({key: t.requires_grad_() for key, t in row.items()}, "learned", False, "triton", go[b : b + 1])
        assert rel_err(padded["o"][b : b + 1], alone["o"]) <= 1e-5
        assert rel_err(padded["dq"][b : b + 1], alone["dq"]) <= 1e-5
        for name in ("dk", "dv"):
            assert rel_err(padded[name][b : b + 1, :, :length], alone[name]) <= 1e-5, name
        if length > 1:   # with one interval o does not depend on dt (d dt = 0 in exact arithmetic)
            assert rel_err(padded["ddt"][b : b + 1, :length], alone["ddt"]) <= 1e-5


class _LaunchCounter:
    """Stands in for a Triton kernel: counts launches, then launches the real one."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


def test_deterministic_mode_selects_the_dq_kernel(monkeypatch):
    """torch.use_deterministic_algorithms(True) (Lightning's deterministic=True) must not get the
    fp32-atomics dq; ATOMIC_DQ = None follows it, an explicit ATOMIC_DQ still forces a path."""
    was_on = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    monkeypatch.setattr(tfn, "ATOMIC_DQ", None)
    try:
        with monkeypatch.context() as on_gpu:   # the choice as a GPU run makes it
            on_gpu.setattr(tfn, "interpreting", lambda: False)
            torch.use_deterministic_algorithms(False)
            assert tfn.use_atomic_dq() is True
            torch.use_deterministic_algorithms(True)
            assert tfn.use_atomic_dq() is False
            torch.use_deterministic_algorithms(True, warn_only=True)
            assert tfn.use_atomic_dq() is False
            on_gpu.setattr(tfn, "ATOMIC_DQ", True)      # explicit override (tests, benchmarks)
            assert tfn.use_atomic_dq() is True
        # and the launcher takes the separate dq kernel in deterministic mode (warn_only: on a GPU
        # the fp64 reference's cuBLAS calls would otherwise need CUBLAS_WORKSPACE_CONFIG)
        torch.use_deterministic_algorithms(True, warn_only=True)
        counter = _LaunchCounter(tfn._bwd_dq_kernel)
        monkeypatch.setattr(tfn, "_bwd_dq_kernel", counter)
        check_against_reference(17, 8, 8, True, "learned", True, seed=29, tol=1e-4)
        assert counter.launches == 1
    finally:
        torch.use_deterministic_algorithms(was_on, warn_only=warn_only)


def test_strided_inputs_from_a_bnhd_layout():
    """q, k, v as [B, N, H, D] tensors viewed as [B, H, N, D] (non-contiguous), dt stride-0."""
    g = torch.Generator().manual_seed(21)
    leaves = [torch.randn(2, 17, 2, 16, generator=g).to(DEVICE).requires_grad_() for _ in range(3)]
    dt = (0.5 + torch.rand(1, 17, generator=g)).to(DEVICE).requires_grad_()
    go = torch.randn(2, 2, 17, 16, generator=g).to(DEVICE)
    out = {}
    for backend in ("triton", "reference"):
        q, k, v = (2.0 * leaves[0]).transpose(1, 2), leaves[1].transpose(1, 2), leaves[2].transpose(1, 2)
        o = continuous_attention(q, k, v, causal=True, dt=dt, backend=backend)
        out[backend] = [o, *torch.autograd.grad(o, [*leaves, dt], go)]
    for name, got, ref in zip(("o", "dq", "dk", "dv", "ddt"), out["triton"], out["reference"]):
        assert rel_err(got, ref) <= 1e-4, name


def test_fp16_with_large_knot_spacings_stays_in_range():
    """dt ~ 1e5 (e.g. seconds; fp32 dt with fp16 q, k, v): unscaled weights dt e phi2 would pass
    fp16's 65504 before the PV dot; the kernel rescales dt per batch row (o does not change)."""
    leaves = make_inputs(2, 2, 33, 16, 16, sink="learned", irregular=True, seed=17, dtype=torch.float16)
    leaves["dt"] = (leaves["dt"].detach().float() * 1e5).requires_grad_()
    go = torch.randn(2, 2, 33, 16, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    got = run(leaves, "learned", True, "triton", go)
    ref = run(leaves, "learned", True, "reference", go, compute=F64)
    for name in NAMES:
        scale = 1e5 if name == "ddt" else 1.0   # d dt is O(1e-5): compare it at O(1)
        assert torch.isfinite(got[name]).all(), name
        assert rel_err(got[name] * scale, ref[name] * scale) <= 5e-3, name


@pytest.mark.parametrize("scale", [-0.3, 0.0], ids=["negative", "zero"])
def test_nonpositive_scale(scale):
    """The kernels run with scale >= 0; a negative scale flips q (and dq), zero gives equal scores."""
    leaves = make_inputs(2, 2, 19, 16, 16, sink="learned", irregular=True, seed=23)
    go = torch.randn(2, 2, 19, 16, generator=torch.Generator().manual_seed(4)).to(DEVICE)
    out = {}
    for backend in ("triton", "reference"):
        x = {key: (t.double() if backend == "reference" else t) for key, t in leaves.items()}
        o = continuous_attention(x["q"], x["k"], x["v"], x["k0"], x["v0"], causal=True, dt=x["dt"],
                                 scale=scale, backend=backend)
        out[backend] = [o, *torch.autograd.grad(o, list(leaves.values()), go.to(o.dtype))]
    for name, got, ref in zip(("o", "dq", "dk", "dv", "dk0", "dv0", "ddt"), out["triton"], out["reference"]):
        assert rel_err(got, ref) <= 1e-4, name


def test_saves_only_linear_memory_for_backward():
    leaves = make_inputs(1, 1, 130, 16, 16, sink="learned", irregular=True, seed=0)
    o = continuous_attention(leaves["q"], leaves["k"], leaves["v"], leaves["k0"], leaves["v0"],
                             causal=True, dt=leaves["dt"], backend="triton")
    node = o.grad_fn
    while type(node).__name__ != "ContinuousAttentionTritonBackward":
        node = node.next_functions[0][0]
    saved = node.saved_tensors
    saved = [t for t in saved if t is not None]    # key_lengths: None without ragged rows
    assert saved and all(sum(size >= 130 for size in t.shape) <= 1 for t in saved), [t.shape for t in saved]


def test_cpu_tensors_outside_the_interpreter_raise(monkeypatch):
    monkeypatch.setattr(tfn, "interpreting", lambda: False)
    q = torch.randn(1, 1, 5, 16)
    with pytest.raises(ValueError, match="CUDA tensors.*TRITON_INTERPRET=1.*backend='torch'"):
        continuous_attention(q, q, q, backend="triton")


@pytest.mark.parametrize("d,dv", [(129, 129), (16, 200), (256, 8)])
def test_unsupported_head_dims_raise(d, dv):
    q = torch.randn(1, 1, 5, d, device=DEVICE)
    v = torch.randn(1, 1, 5, dv, device=DEVICE)
    with pytest.raises(ValueError, match=r"head dims 1\.\.128.*backend='torch'"):
        continuous_attention(q, q, v, backend="triton")


def test_float64_raises():
    q = torch.randn(1, 1, 5, 16, dtype=F64, device=DEVICE)
    with pytest.raises(ValueError, match="float64"):
        continuous_attention(q, q, q, backend="triton")


_COMPILE_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from tsattn.ops.continuous import function as f, triton_bwd as bwd, triton_fwd as fwd

    def compile_(fn, ptr_types, num_warps, num_stages, **consts):
        sig = {a: "constexpr" if a in consts else ptr_types.get(a, "fp32" if a == "scale" else "i32")
               for a in fn.arg_names}
        out = triton.compile(ASTSource(fn, sig, constexprs=consts), target=GPUTarget("cuda", 90, 32),
                             options=dict(num_warps=num_warps, num_stages=num_stages))
        assert "cubin" in out.asm and "mma" in out.asm["ptx"] or fn is bwd._bwd_preprocess, fn

    bf = "*bf16"
    f32 = {n: "*fp32" for n in ("DT", "LSE", "DELTA", "DKL", "DKR", "DVL", "DVR", "DDT")}
    f32["LENS"] = "*i32"
    # the GPU table at D = 64 (causal), and a padded head (D = 8, Dv = 4) with ragged rows
    for d, dv, causal, lens in ((64, 64, True, False), (8, 4, False, True)):
        dims = dict(D=d, DP=f.padded_dim(d), DV=dv, DVP=f.padded_dim(dv), CAUSAL=causal, HAS_LENS=lens)
        c = f.fwd_config(dims["DP"], dims["DVP"], causal)
        compile_(fwd._fwd_kernel, {**dict.fromkeys(("Q", "KEYS", "VALUES", "O"), bf), **f32}, c.num_warps,
                 c.num_stages, BM=c.block_m, BN=c.block_n, DOT_PREC="tf32", **dims)
        compile_(bwd._bwd_preprocess, {"O": bf, "DO": bf, **f32}, 4, 2, DV=dv, DVP=dims["DVP"], BM=64)
        c = f.bwd_config(dims["DP"], dims["DVP"], causal)
        compile_(bwd._bwd_dkdv_kernel, {**dict.fromkeys(("Q", "KEYS", "VALUES", "DO"), bf), "DQ": "*fp32", **f32},
                 c.num_warps, c.num_stages, BM=c.block_m, BN=c.block_n, DOT_PREC="tf32", ATOMIC_DQ=True,
                 HAS_DDT=True, **dims)
        c = f.dq_config(dims["DP"], dims["DVP"], causal)
        compile_(bwd._bwd_dq_kernel, {**dict.fromkeys(("Q", "KEYS", "VALUES", "DO", "DQ"), bf), **f32},
                 c.num_warps, c.num_stages, BM=c.block_m, BN=c.block_n, DOT_PREC="tf32", **dims)
    print("compiled")
    """
)


def test_kernels_compile_for_sm90():
    """Ahead-of-time compilation for an H100/H200 (sm_90) with the GPU block table, at D = 64 and
    at a padded D = 8 with ragged rows: no GPU needed."""
    try:
        from triton.backends.nvidia import compiler  # noqa: F401
    except ImportError:
        pytest.skip("Triton's NVIDIA backend is not installed")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {key: val for key, val in os.environ.items() if key != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, root], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0 and "compiled" in proc.stdout, proc.stderr[-3000:]

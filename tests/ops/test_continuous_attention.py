"""The continuous-attention op: torch path vs the fp64 reference, properties of the definition,
gradients, numerical stress and input validation."""
import math

import pytest
import torch

from tsattn import continuous_attention

F64 = torch.float64


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    return ((x.to(F64) - ref.to(F64)).norm() / ref.to(F64).norm().clamp_min(1e-300)).item()


def make_inputs(b=2, h=3, n=17, d=8, dv=None, *, sink="zeros", irregular=False, seed=0, dtype=F64, q_scale=2.0):
    g = torch.Generator().manual_seed(seed)
    dv = d if dv is None else dv
    q = q_scale * torch.randn(b, h, n, d, generator=g, dtype=F64)
    k = torch.randn(b, h, n, d, generator=g, dtype=F64)
    v = torch.randn(b, h, n, dv, generator=g, dtype=F64)
    if sink == "zeros":
        k0 = v0 = None
    elif sink == "given":  # a learned per-head sink: [H, 1, D]
        k0 = torch.randn(h, 1, d, generator=g, dtype=F64)
        v0 = torch.randn(h, 1, dv, generator=g, dtype=F64)
    elif sink == "first":
        k0, v0 = k[..., :1, :], v[..., :1, :]
    else:
        raise ValueError(sink)
    dt = 0.1 + 2.0 * torch.rand(b, n, generator=g, dtype=F64) if irregular else None
    cast = lambda x: None if x is None else x.to(dtype)  # noqa: E731
    return dict(q=cast(q), k=cast(k), v=cast(v), k0=cast(k0), v0=cast(v0), dt=cast(dt))


CASES = [
    # (n, d, dv, sink, irregular)
    (1, 8, 8, "zeros", False),
    (2, 8, 5, "given", True),
    (3, 4, 4, "first", True),
    (63, 16, 16, "zeros", True),
    (63, 8, 12, "given", False),
    (111, 8, 8, "first", False),
    (111, 12, 6, "given", True),
]


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("n,d,dv,sink,irregular", CASES)
def test_torch_matches_reference(n, d, dv, sink, irregular, causal):
    x = make_inputs(n=n, d=d, dv=dv, sink=sink, irregular=irregular, seed=n + d)
    ref = continuous_attention(**x, causal=causal, backend="reference")
    out64 = continuous_attention(**x, causal=causal, backend="torch")
    assert out64.dtype == F64 and out64.shape == (2, 3, n, dv)
    assert rel_err(out64, ref) <= 1e-10
    x32 = {key: (t.float() if t is not None else None) for key, t in x.items()}
    out32 = continuous_attention(**x32, causal=causal, backend="torch")
    assert out32.dtype == torch.float32
    assert rel_err(out32, ref) <= 1e-5


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
@pytest.mark.parametrize("n,d,dv,sink,irregular", [CASES[1], CASES[3], CASES[6]])
def test_torch_gradients_match_reference(n, d, dv, sink, irregular, causal):
    x = make_inputs(n=n, d=d, dv=dv, sink=sink, irregular=irregular, seed=7)
    leaves = {key: t.detach().clone().requires_grad_() for key, t in x.items() if t is not None}
    go = torch.randn(2, 3, n, dv, dtype=F64, generator=torch.Generator().manual_seed(1))

    def grads(backend, dtype):
        inputs = {key: (leaves[key].to(dtype) if key in leaves else None) for key in x}
        if sink == "first":  # the sink is a slice of k and v, so its gradient lands there
            inputs["k0"], inputs["v0"] = inputs["k"][..., :1, :], inputs["v"][..., :1, :]
        out = continuous_attention(**inputs, causal=causal, backend=backend)
        return dict(zip(leaves, torch.autograd.grad(out, list(leaves.values()), go.to(dtype))))

    ref = grads("reference", F64)
    for dtype, tol in [(F64, 1e-10), (torch.float32, 1e-5)]:
        got = grads("torch", dtype)
        for key in leaves:
            assert rel_err(got[key], ref[key]) <= tol, (key, dtype)


def quadrature(q, k, v, k0, v0, dt, causal, scale, steps=4000):
    """The defining integrals by the composite midpoint rule on each interval (fp64)."""
    keys = torch.cat([k0, k], -2)
    values = torch.cat([v0, v], -2)
    n = q.shape[-2]
    s = (torch.arange(steps, dtype=F64) + 0.5) / steps                      # [S] in (0, 1)
    ks = keys[..., :-1, None, :] * (1 - s)[:, None] + keys[..., 1:, None, :] * s[:, None]  # [B,H,N,S,D]
    vs = values[..., :-1, None, :] * (1 - s)[:, None] + values[..., 1:, None, :] * s[:, None]
    width = dt[:, None, :, None] / steps                                     # [B,1,N,1]
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=F64)
    for t in range(n):
        hi = t + 1 if causal else n                                          # intervals 1..hi
        a = scale * torch.einsum("bhd,bhisd->bhis", q[..., t, :], ks[..., :hi, :, :])
        e = torch.exp(a - a.amax(dim=(-1, -2), keepdim=True)) * width[:, :, :hi]
        out[..., t, :] = torch.einsum("bhis,bhisd->bhd", e, vs[..., :hi, :, :]) / e.sum(dim=(-1, -2))[..., None]
    return out


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_reference_matches_direct_quadrature_of_the_integrals(causal):
    x = make_inputs(b=1, h=2, n=6, d=4, dv=3, sink="given", irregular=True, seed=3, q_scale=1.0)
    k0 = x["k0"].expand(1, 2, 1, 4)
    v0 = x["v0"].expand(1, 2, 1, 3)
    scale = 0.5
    ref = continuous_attention(**x, causal=causal, scale=scale, backend="reference")
    direct = quadrature(x["q"], x["k"], x["v"], k0, v0, x["dt"], causal, scale)
    assert rel_err(ref, direct) <= 1e-6  # midpoint rule error ~ (1/steps)^2


@pytest.mark.parametrize("backend", ["reference", "torch"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_zero_query_gives_trapezoid_mean_of_values(backend, causal):
    x = make_inputs(b=2, h=2, n=9, d=4, dv=3, sink="given", irregular=True, seed=5)
    x["q"] = torch.zeros_like(x["q"])
    out = continuous_attention(**x, causal=causal, backend=backend)
    values = torch.cat([x["v0"].expand(2, 2, 1, 3), x["v"]], -2)            # knots 0..N
    dt = x["dt"]
    for t in range(9):
        hi = t + 1 if causal else 9
        # trapezoid weights over knots 0..hi: (dt_j + dt_{j+1}) / 2, one-sided at the ends
        w = torch.zeros(2, hi + 1, dtype=F64)
        w[:, :-1] += dt[:, :hi] / 2
        w[:, 1:] += dt[:, :hi] / 2
        expect = torch.einsum("bj,bhjd->bhd", w, values[..., : hi + 1, :]) / w.sum(-1)[:, None, None]
        assert rel_err(out[..., t, :], expect) <= 1e-12


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_equal_neighbour_scores_give_plain_softmax_weights(backend):
    # Keys in runs of three equal vectors: the middle knot of each run has a_{j-1} = a_j = a_{j+1},
    # so b_j = log(phi2(0) + phi2(0)) = 0 and its weight is exp(a_j) / Z exactly as in softmax.
    g = torch.Generator().manual_seed(11)
    runs = torch.randn(1, 1, 4, 6, generator=g, dtype=F64)
    k = runs.repeat_interleave(3, dim=2)                                      # N = 12
    q = torch.randn(1, 1, 12, 6, generator=g, dtype=F64)
    v = torch.eye(12, dtype=F64)[None, None]                                  # output row = weights of knots 1..N
    p = continuous_attention(q, k, v, causal=False, scale=1.0, backend=backend)
    a = q @ runs.transpose(-1, -2)                                            # [1,1,12,4] score of each run
    middles = [1, 4, 7, 10]
    for r in range(1, 4):
        ratio = p[..., middles[r]] / p[..., middles[0]]
        assert torch.allclose(ratio, torch.exp(a[..., r] - a[..., 0]), rtol=1e-12, atol=0)


@pytest.mark.parametrize("backend", ["reference", "torch"])
def test_uniform_rescaling_of_dt_changes_nothing(backend):
    x = make_inputs(n=10, sink="given", irregular=True, seed=2)
    out = continuous_attention(**x, backend=backend)
    x["dt"] = x["dt"] * 7.5
    assert rel_err(continuous_attention(**x, backend=backend), out) <= 1e-13


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_causal_output_ignores_the_future(causal):
    x = make_inputs(n=12, sink="given", irregular=True, seed=4)
    out = continuous_attention(**x, causal=causal, backend="torch")
    y = {key: (t.clone() if t is not None else None) for key, t in x.items()}
    y["k"][..., 8:, :] += 1.0
    y["v"][..., 8:, :] -= 2.0
    y["dt"][..., 8:] *= 3.0
    out2 = continuous_attention(**y, causal=causal, backend="torch")
    same = torch.equal(out[..., :7, :], out2[..., :7, :])
    assert same == causal  # causal queries 0..6 see knots <= 7 only; bidirectional ones see all


@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_gradcheck_fp64_all_inputs(causal):
    x = make_inputs(b=2, h=2, n=5, d=3, dv=2, sink="given", irregular=True, seed=9)
    inputs = tuple(x[key].detach().clone().requires_grad_() for key in ("q", "k", "v", "k0", "v0", "dt"))

    def f(q, k, v, k0, v0, dt):
        return continuous_attention(q, k, v, k0, v0, causal=causal, dt=dt, backend="torch")

    assert torch.autograd.gradcheck(f, inputs)


def test_gradcheck_fp64_first_sink_with_large_scores():
    # large scores exercise the closed-form (non-series) branch in the backward
    x = make_inputs(b=1, h=2, n=6, d=4, sink="zeros", seed=10, q_scale=6.0)
    q, k, v = (x[key].detach().clone().requires_grad_() for key in ("q", "k", "v"))

    def f(q, k, v):
        return continuous_attention(q, k, v, k[..., :1, :], v[..., :1, :], causal=True, backend="torch")

    assert torch.autograd.gradcheck(f, (q, k, v))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_huge_scores_stay_finite(dtype, causal):
    g = torch.Generator().manual_seed(0)
    n, d = 33, 8
    q = (torch.randn(2, 2, n, d, generator=g) * 40).to(dtype).requires_grad_()
    k = (torch.randn(2, 2, n, d, generator=g) * 40).to(dtype).requires_grad_()
    v = torch.randn(2, 2, n, d, generator=g).to(dtype).requires_grad_()
    a = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(d)
    assert a.abs().max() > 1e3 and a.abs().max() < 2e4  # scores up to ~1e4
    out = continuous_attention(q, k, v, k[..., :1, :], v[..., :1, :], causal=causal, backend="torch")
    assert out.dtype == dtype and torch.isfinite(out).all()
    out.float().square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    # and it is still the right answer (fp32 scores of size 1e4 carry ~1e-3 absolute rounding)
    ref = continuous_attention(q.double(), k.double(), v.double(), k[..., :1, :].double(), v[..., :1, :].double(),
                               causal=causal, backend="reference")
    assert rel_err(out, ref) <= (0.05 if dtype == torch.bfloat16 else 2e-2)


def test_bf16_matches_reference_at_ordinary_scores():
    x = make_inputs(n=40, sink="given", irregular=True, seed=12, dtype=torch.bfloat16)
    ref = continuous_attention(**{k: (t.double() if t is not None else None) for k, t in x.items()}, backend="reference")
    out = continuous_attention(**x, backend="torch")
    assert out.dtype == torch.bfloat16 and rel_err(out, ref) <= 1e-2


def test_default_scale_is_inverse_sqrt_d():
    x = make_inputs(n=7, d=9, seed=13)
    assert torch.equal(
        continuous_attention(**x, backend="torch"), continuous_attention(**x, scale=1 / 3, backend="torch")
    )


def test_auto_backend_on_cpu_is_the_cpu_kernel():
    x = make_inputs(n=7, seed=14)
    assert torch.equal(continuous_attention(**x, backend="auto"), continuous_attention(**x, backend="cpu"))


def test_torch_compile_matches_eager():
    x = make_inputs(b=2, h=2, n=20, d=8, sink="given", irregular=True, seed=15, dtype=torch.float32)
    leaves = [x[key].clone().requires_grad_() for key in ("q", "k", "v")]

    def f(q, k, v):
        return continuous_attention(q, k, v, x["k0"], x["v0"], dt=x["dt"], causal=True, backend="torch")

    eager = f(*leaves)
    g_eager = torch.autograd.grad(eager.sum(), leaves)
    compiled = torch.compile(f, fullgraph=True)(*leaves)
    g_comp = torch.autograd.grad(compiled.sum(), leaves)
    assert rel_err(compiled, eager) <= 1e-5
    for a, b in zip(g_comp, g_eager):
        assert rel_err(a, b) <= 1e-5


# ---------------------------------------------------------------- validation

def _base():
    return make_inputs(b=1, h=2, n=5, d=4, seed=0, dtype=torch.float32)


@pytest.mark.parametrize(
    "mutate,match",
    [
        (lambda x: x.update(backend="cuda"), "backend"),
        (lambda x: x.update(q=x["q"][0]), r"`q` must have shape \[B, H, N, D\]"),
        (lambda x: x.update(k=x["k"][..., :3]), r"`k` must have shape \[B, H, N, D\] = \[1, 2, N, 4\]"),
        (lambda x: x.update(k=x["k"][:, :1]), "`k` must have shape"),
        (lambda x: x.update(v=x["v"][..., :3, :]), "`v` must have shape"),
        (lambda x: x.update(k=x["k"][..., :3, :], v=x["v"][..., :3, :], causal=True),
         "causal attention needs as many queries as keys"),
        (lambda x: x.update(v=x["v"].double()), "`v` has dtype torch.float64 but `q` has torch.float32"),
        (lambda x: x.update(q=x["q"].long(), k=x["k"].long(), v=x["v"].long()), "float16, bfloat16, float32 or float64"),
        (lambda x: x.update(k0=torch.zeros(3, 1, 4)), "`k0` of shape"),
        (lambda x: x.update(v0=torch.zeros(2, 1, 4).double()), "`v0` has dtype"),
        (lambda x: x.update(dt=torch.tensor([1.0, 1.0, 0.0, 1.0, 1.0])), "`dt` must be positive"),
        (lambda x: x.update(dt=torch.tensor([1.0, -1.0, 1.0, 1.0, 1.0])), "`dt` must be positive"),
        (lambda x: x.update(dt=torch.full((5,), float("nan"))), "`dt` must be positive and finite"),
        (lambda x: x.update(dt=torch.ones(3)), "`dt` of shape"),
        (lambda x: x.update(dt=torch.ones(5, dtype=torch.long)), "`dt` must be a floating-point"),
        (lambda x: x.update(q=x["q"].numpy()), "`q` must be a torch.Tensor"),
        (lambda x: x.update(scale=float("inf")), "`scale` must be a finite"),
        (lambda x: x.update(causal="yes"), "`causal` must be a bool"),
        (lambda x: x.update(q=x["q"][..., :0, :]), "M >= 1"),
    ],
)
def test_bad_input_raises_a_clear_value_error(mutate, match):
    x = _base()
    x["backend"] = "torch"
    mutate(x)
    with pytest.raises(ValueError, match=match):
        continuous_attention(**x)



@pytest.mark.parametrize("causal", [False, True], ids=["bidir", "causal"])
def test_blocked_eager_path_matches_reference(monkeypatch, causal):
    # Small blocks force several query blocks (with causal knot skipping) and several head groups.
    import tsattn.ops.continuous.torch_impl as impl

    monkeypatch.setattr(impl, "BLOCK_ELEMENTS", 16 * 40)
    monkeypatch.setattr(impl, "CAUSAL_QUERY_BLOCK", 16)
    x = make_inputs(b=3, h=2, n=53, d=5, dv=3, sink="given", irregular=True, seed=21)
    leaves = {key: t.detach().clone().requires_grad_() for key, t in x.items()}
    go = torch.randn(3, 2, 53, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    results = {}
    for backend in ("reference", "torch"):
        out = continuous_attention(**leaves, causal=causal, backend=backend)
        results[backend] = (out, torch.autograd.grad(out, list(leaves.values()), go))
    assert rel_err(results["torch"][0], results["reference"][0]) <= 1e-10
    for got, ref in zip(results["torch"][1], results["reference"][1]):
        assert rel_err(got, ref) <= 1e-10


def test_auto_backend_falls_back_to_torch_outside_the_kernel_envelope():
    from tsattn.ops.continuous.api import resolve_backend

    class FakeCuda:  # resolve_backend reads only is_cuda, dtype and shape
        is_cuda = True

        def __init__(self, dtype, d):
            self.dtype, self.shape = dtype, (1, 1, 5, d)

    assert resolve_backend("auto", FakeCuda(torch.float32, 64)) == "triton"
    assert resolve_backend("auto", FakeCuda(torch.bfloat16, 8)) == "triton"    # every head dim 1..128
    assert resolve_backend("auto", FakeCuda(torch.float16, 4), dv=24) == "triton"
    assert resolve_backend("auto", FakeCuda(torch.float32, 1), dv=128) == "triton"
    assert resolve_backend("auto", FakeCuda(torch.float32, 64), dv=129) == "torch"
    assert resolve_backend("auto", FakeCuda(torch.float32, 256)) == "torch"
    assert resolve_backend("auto", FakeCuda(torch.float64, 64)) == "torch"
    from tsattn.ops.continuous.cpu_kernel import available

    # CPU tensors: the CPU kernel where it builds (tests/ops/test_cpu_kernel.py), else the torch path
    assert resolve_backend("auto", torch.zeros(1, 1, 5, 64)) == ("cpu" if available() else "torch")


# ---------------------------------------------------------------- property-based

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    b=st.integers(1, 2), h=st.integers(1, 3), n=st.integers(1, 40), d=st.integers(1, 9), dv=st.integers(1, 7),
    causal=st.booleans(), sink=st.sampled_from(["zeros", "given", "first"]), irregular=st.booleans(),
    q_scale=st.floats(0.0, 8.0), seed=st.integers(0, 2**16), m=st.integers(1, 40), ragged=st.booleans(),
)
def test_torch_matches_reference_on_random_problems(b, h, n, d, dv, causal, sink, irregular, q_scale, seed, m,
                                                    ragged):
    x = make_inputs(b=b, h=h, n=n, d=d, dv=dv, sink=sink, irregular=irregular, seed=seed, q_scale=q_scale)
    if not causal:   # cross-attention: m queries (possibly != n) read the n keys
        x["q"] = q_scale * torch.randn(b, h, m, d, dtype=F64, generator=torch.Generator().manual_seed(seed + 1))
    if ragged:
        x["key_lengths"] = torch.randint(0, n + 1, (b,), generator=torch.Generator().manual_seed(seed + 2))
    ref = continuous_attention(**x, causal=causal, backend="reference")
    out = continuous_attention(**x, causal=causal, backend="torch")
    assert rel_err(out, ref) <= 1e-10
    # every output is a convex combination of the knots' values
    values = torch.cat([(x["v0"] if x["v0"] is not None else torch.zeros(1, 1, 1, dv, dtype=F64)).expand(b, h, 1, dv),
                        x["v"]], -2)
    assert (out <= values.amax(-2, keepdim=True) + 1e-12).all() and (out >= values.amin(-2, keepdim=True) - 1e-12).all()

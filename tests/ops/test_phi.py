"""log_phi2 against a 60-digit decimal evaluation, in fp64 and fp32, over [-1e4, 1e4]."""
import decimal

import pytest
import torch

from tsattn import log_phi2
from tsattn.ops.continuous.phi import dphi2_coefficients, horner, phi2_coefficients


def exact_log_phi2(x: float) -> float:
    """log((e^x - 1 - x) / x^2) with 60 significant digits (series at tiny |x|, where the closed form is 0/0)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        d = decimal.Decimal(x)
        if abs(d) < decimal.Decimal("1e-12"):
            value = decimal.Decimal(1) / 2 + d / 6 + d * d / 24
        else:
            value = (d.exp() - 1 - d) / (d * d)
        return float(value.ln())


def grid() -> torch.Tensor:
    mags = torch.logspace(-30, 4, 700, dtype=torch.float64)
    pts = torch.cat([-mags, torch.zeros(1, dtype=torch.float64), mags, torch.linspace(-3, 3, 601, dtype=torch.float64)])
    return torch.unique(pts)


@pytest.fixture(scope="module")
def truth():
    x = grid()
    return x, torch.tensor([exact_log_phi2(v) for v in x.tolist()], dtype=torch.float64)


def scaled_error(got: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """|error| / max(1, |ref|): relative error of log phi2 where it is large, of phi2 itself near log phi2 = 0."""
    return (got.to(torch.float64) - ref).abs() / ref.abs().clamp_min(1.0)


def test_log_phi2_fp64_is_exact_to_rounding(truth):
    x, ref = truth
    assert scaled_error(log_phi2(x), ref).max() <= 1e-14


def test_log_phi2_fp32_within_1e6(truth):
    x, _ = truth
    x32 = x.float()
    ref = torch.tensor([exact_log_phi2(v) for v in x32.double().tolist()], dtype=torch.float64)  # same fp32 inputs
    out = log_phi2(x32)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert scaled_error(out, ref).max() <= 1e-6


def test_log_phi2_known_values():
    x = torch.tensor([0.0, 1e-20, -1e-20], dtype=torch.float64)
    assert torch.allclose(log_phi2(x), torch.full((3,), -0.6931471805599453, dtype=torch.float64), rtol=0, atol=1e-16)
    # phi2(x) ~ -1/x for x -> -inf and ~ e^x / x^2 for x -> +inf
    big = torch.tensor([-1e30, 1e3], dtype=torch.float64)
    out = log_phi2(big)
    assert abs(out[0].item() - (-69.07755278982137)) < 1e-12
    assert abs(out[1].item() - (1e3 - 2 * 6.907755278982137)) < 1e-9


def test_log_phi2_bf16_and_gradient():
    x = torch.linspace(-50, 50, 101, dtype=torch.bfloat16)
    assert log_phi2(x).dtype == torch.bfloat16 and torch.isfinite(log_phi2(x)).all()
    x = torch.linspace(-30, 30, 61, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(log_phi2, (x,))


def test_series_coefficients_match_the_integrals():
    # phi2(x) = int_0^1 (1-s) e^{sx} ds and phi2'(x) = int_0^1 s(1-s) e^{sx} ds, midpoint rule
    s = (torch.arange(200000, dtype=torch.float64) + 0.5) / 200000
    for xv in (-0.9, 0.3, 0.99):
        x = torch.tensor(xv, dtype=torch.float64)
        assert abs(horner(x, phi2_coefficients(17)).item() - ((1 - s) * torch.exp(s * xv)).mean().item()) < 1e-11
        assert abs(horner(x, dphi2_coefficients(17)).item() - (s * (1 - s) * torch.exp(s * xv)).mean().item()) < 1e-11


def test_log_phi2_rejects_integers():
    with pytest.raises(ValueError, match="floating-point"):
        log_phi2(torch.arange(3))

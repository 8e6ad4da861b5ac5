"""The special functions of continuous attention, evaluated without cancellation.

    phi2(x) = (e^x - 1 - x) / x^2 = int_0^1 (1 - s) e^{s x} ds          phi2(0) = 1/2
    phi2'(x) = int_0^1 s (1 - s) e^{s x} ds                               phi2'(0) = 1/6

Near 0 the closed forms cancel catastrophically, so every routine here switches to the Taylor
series ``phi2(x) = sum_k x^k / (k+2)!`` for ``|x| < SERIES_RADIUS`` and uses the closed form
outside, where it is well conditioned. The number of series terms is chosen per dtype so that
the truncation error is below the dtype's rounding error at the radius.
"""
from __future__ import annotations

import math

import torch

# Below this |x| the Taylor series is used; above it the closed forms lose at most ~4 bits
# (phi2' is the worst: e^x (x-2) + (x+2) cancels to 0.28 at x = 1).
SERIES_RADIUS = 1.0
# Highest power kept in the series of phi2 and phi2', per compute dtype: the first dropped term,
# (n+2) / (n+4)! at |x| = 1, is below the dtype's rounding error.
_SERIES_DEGREE = {torch.float32: 9, torch.float64: 17}


def series_degree(dtype: torch.dtype) -> int:
    """Highest power of x kept in the Taylor series of phi2 for ``dtype`` (fp32 or fp64)."""
    try:
        return _SERIES_DEGREE[dtype]
    except KeyError:
        raise ValueError(f"series for phi2 are tabulated for float32 and float64, not {dtype}") from None


def phi2_coefficients(degree: int) -> list[float]:
    """Taylor coefficients c_k = 1/(k+2)! of phi2, k = 0..degree."""
    return [1.0 / math.factorial(k + 2) for k in range(degree + 1)]


def dphi2_coefficients(degree: int) -> list[float]:
    """Taylor coefficients (k+1)/(k+3)! of phi2', k = 0..degree."""
    return [(k + 1) / math.factorial(k + 3) for k in range(degree + 1)]


def horner(x: torch.Tensor, coefficients: list[float]) -> torch.Tensor:
    """sum_k coefficients[k] * x^k by Horner's rule (in place on one buffer when autograd is off)."""
    if torch.is_grad_enabled() and x.requires_grad:
        acc = torch.full_like(x, coefficients[-1])
        for c in reversed(coefficients[:-1]):
            acc = acc * x + c
        return acc
    acc = x * coefficients[-1] + coefficients[-2]
    for c in reversed(coefficients[:-2]):
        acc.mul_(x).add_(c)
    return acc


def horner_even_odd(x: torch.Tensor, coefficients: list[float]) -> tuple[torch.Tensor, torch.Tensor]:
    """(p(x), p(-x)) for the polynomial with ``coefficients``, sharing one pass over x^2."""
    x2 = x * x
    even = horner(x2, coefficients[0::2])
    odd = horner(x2, coefficients[1::2]) * x
    return even + odd, even - odd


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def log_phi2(x: torch.Tensor) -> torch.Tensor:
    """log phi2(x), finite and accurate for every finite x.

    Three regions, each free of cancellation:
      |x| < 1:  log of the Taylor series,
      x >= 1:   x - 2 log x + log1p(-(1 + x) e^{-x}),
      x <= -1:  log(e^x - 1 - x) - 2 log(-x)   (e^x - 1 - x = -x - (1 - e^x) >= 1/e).
    Half-precision inputs are evaluated in float32 and returned in their own dtype.
    Differentiable (autograd flows through the selected region only).
    """
    if not torch.is_floating_point(x):
        raise ValueError(f"log_phi2 expects a floating-point tensor, got {x.dtype}")
    dtype = _compute_dtype(x)
    xc = x.to(dtype)
    r = SERIES_RADIUS
    small = xc.abs() < r
    xs = xc.clamp(-r, r)
    series = torch.log(horner(xs, phi2_coefficients(series_degree(dtype))))
    xp = xc.clamp(min=r)
    positive = xp - 2.0 * torch.log(xp) + torch.log1p(-(1.0 + xp) * torch.exp(-xp))
    xn = xc.clamp(max=-r)
    negative = torch.log(torch.expm1(xn) - xn) - 2.0 * torch.log(-xn)
    out = torch.where(small, series, torch.where(xc > 0, positive, negative))
    return out.to(x.dtype)

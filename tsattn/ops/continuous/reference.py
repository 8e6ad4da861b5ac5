"""fp64 reference of continuous softmax attention, written straight from the closed form.

This is the yardstick for every other backend: slow, O(N^2) memory, differentiable by autograd,
and as close to the maths as possible (see docs/continuous-attention.md):

    o_t = sum_j softmax_j(a_j + log w_j) v_j,     j = 0..hi(t)
    w_j = dt_j phi2(a_{j-1} - a_j) + dt_{j+1} phi2(a_{j+1} - a_j)

with a term dropped when its neighbour is missing (j - 1 < 0 or j + 1 > hi). Knot 0 is the sink
(k0, v0); knot j >= 1 is row j - 1 of k and v; query t (0-based) is knot t + 1, so causal
attention has hi(t) = t + 1 and bidirectional attention hi = N.
"""
from __future__ import annotations

import torch

from .phi import log_phi2

# Stands in for log(0) of a missing term: finite, so logaddexp and its gradient stay finite.
_LOG_ZERO = -1e300


def continuous_attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    k0: torch.Tensor,
    v0: torch.Tensor,
    *,
    causal: bool,
    scale: float,
    dt: torch.Tensor,
) -> torch.Tensor:
    """Continuous attention in float64.

    Args:
        q, k: [B, H, N, D]; v: [B, H, N, Dv]; k0: [B, H, 1, D]; v0: [B, H, 1, Dv] (already expanded).
        causal: query t integrates over [tau_0, tau_{t+1}] instead of [tau_0, tau_N].
        scale: multiplies q . k.
        dt: [B, N] positive knot spacings; dt[:, i] is the interval that ends at knot i + 1.
    Returns:
        o: [B, H, N, Dv] in float64.
    """
    q, k, v, k0, v0, dt = (x.to(torch.float64) for x in (q, k, v, k0, v0, dt))
    n = q.shape[-2]
    keys = torch.cat([k0, k], dim=-2)                        # [B, H, N+1, D]
    values = torch.cat([v0, v], dim=-2)                      # [B, H, N+1, Dv]
    a = scale * q @ keys.transpose(-1, -2)                   # [B, H, N, N+1]  a[t, j] = q_t . k_j
    log_dt = torch.log(dt)[:, None, None, :]                 # [B, 1, 1, N]    interval i = 1..N at i-1

    # Interval i joins knots i-1 and i; both knots take a phi2 term from it.
    left_of_knot = log_dt + log_phi2(a[..., :-1] - a[..., 1:])   # knot i:   dt_i phi2(a_{i-1} - a_i)
    right_of_knot = log_dt + log_phi2(a[..., 1:] - a[..., :-1])  # knot i-1: dt_i phi2(a_i - a_{i-1})
    if causal:
        # query t sees intervals 1..t+1, i.e. interval columns 0..t
        seen = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        left_of_knot = left_of_knot.masked_fill(~seen, _LOG_ZERO)
        right_of_knot = right_of_knot.masked_fill(~seen, _LOG_ZERO)
    log_w = torch.logaddexp(
        torch.nn.functional.pad(left_of_knot, (1, 0), value=_LOG_ZERO),   # knot 0 has no left interval
        torch.nn.functional.pad(right_of_knot, (0, 1), value=_LOG_ZERO),  # knot N has no right interval
    )
    # Knots beyond hi have both terms missing: log_w ~ -1e300, so their weight is exactly zero.
    p = torch.softmax(a + log_w, dim=-1)
    return p @ values

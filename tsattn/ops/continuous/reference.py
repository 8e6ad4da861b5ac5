"""fp64 reference of continuous softmax attention, written straight from the closed form.

This is the yardstick for every other backend: slow, O(M N) memory, differentiable by autograd,
and as close to the maths as possible (see docs/continuous-attention.md):

    o_t = sum_j softmax_j(a_j + log w_j) v_j,     j = 0..hi(t)
    w_j = dt_j phi2(a_{j-1} - a_j) + dt_{j+1} phi2(a_{j+1} - a_j)

with a term dropped when its neighbour is missing (j - 1 < 0 or j + 1 > hi). Knot 0 is the sink
(k0, v0); knot j >= 1 is row j - 1 of k and v. A batch row b holds L_b = key_lengths[b] knots
besides the sink (all N without lengths); rows j >= L_b of k, v and dt are not part of it. Query t
integrates up to knot

    hi(t) = min(t + 1, L_b)   (causal: query t is knot t + 1)        hi = L_b   (otherwise)

and hi = 0 (a row without knots) integrates over the single point tau_0: the sink alone, with
weight 1, so o_t = v0.
"""
from __future__ import annotations

from typing import Optional

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
    key_lengths: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Continuous attention in float64.

    Args:
        q: [B, H, M, D]; k: [B, H, N, D]; v: [B, H, N, Dv]; k0: [B, H, 1, D]; v0: [B, H, 1, Dv]
            (already expanded). causal needs M == N.
        causal: query t integrates over [tau_0, tau_{t+1}] instead of [tau_0, tau_N].
        scale: multiplies q . k.
        dt: [B, N] knot spacings, positive where used; dt[:, i] is the interval that ends at knot i + 1.
        key_lengths: [B] integers in [0, N], or None (= N): rows j >= key_lengths[b] of k, v and dt
            are ignored (they get exactly zero gradient).
    Returns:
        o: [B, H, M, Dv] in float64.
    """
    q, k, v, k0, v0, dt = (x.to(torch.float64) for x in (q, k, v, k0, v0, dt))
    batch, m, n = q.shape[0], q.shape[-2], k.shape[-2]
    lengths = torch.full((batch,), n, device=q.device) if key_lengths is None else key_lengths.to(q.device).long()

    # The row as if it had only its first L_b knots: ignored entries replaced by harmless constants
    # (never used below: every term that would read them is masked), so they get zero gradient.
    kept = torch.arange(n, device=q.device) < lengths[:, None]             # [B, N]
    k = torch.where(kept[:, None, :, None], k, 0.0)
    v = torch.where(kept[:, None, :, None], v, 0.0)
    dt = torch.where(kept, dt, 1.0)

    hi = lengths[:, None].expand(batch, m)                                 # [B, M] last knot query t sees
    if causal:
        hi = torch.minimum(hi, torch.arange(1, m + 1, device=q.device))
    hi = hi[:, None, :, None]                                              # [B, 1, M, 1]

    keys = torch.cat([k0, k], dim=-2)                        # [B, H, N+1, D]
    values = torch.cat([v0, v], dim=-2)                      # [B, H, N+1, Dv]
    a = scale * q @ keys.transpose(-1, -2)                   # [B, H, M, N+1]  a[t, j] = q_t . k_j
    log_dt = torch.log(dt)[:, None, None, :]                 # [B, 1, 1, N]    interval i = 1..N at i-1

    # Interval i joins knots i-1 and i; both knots take a phi2 term from it. Query t sees i <= hi(t).
    seen = torch.arange(1, n + 1, device=q.device) <= hi                   # [B, 1, M, N]
    left_of_knot = log_dt + log_phi2(a[..., :-1] - a[..., 1:])   # knot i:   dt_i phi2(a_{i-1} - a_i)
    right_of_knot = log_dt + log_phi2(a[..., 1:] - a[..., :-1])  # knot i-1: dt_i phi2(a_i - a_{i-1})
    left_of_knot = left_of_knot.masked_fill(~seen, _LOG_ZERO)
    right_of_knot = right_of_knot.masked_fill(~seen, _LOG_ZERO)
    log_w = torch.logaddexp(
        torch.nn.functional.pad(left_of_knot, (1, 0), value=_LOG_ZERO),   # knot 0 has no left interval
        torch.nn.functional.pad(right_of_knot, (0, 1), value=_LOG_ZERO),  # knot N has no right interval
    )
    # Knots beyond hi have both terms missing: log_w ~ -1e300, so their weight is exactly zero.
    # hi = 0: no interval at all; the integral over the point tau_0 is the sink's value (weight 1).
    lone_sink = torch.where(hi == 0, 0.0, log_w[..., :1])
    log_w = torch.cat([lone_sink, log_w[..., 1:]], dim=-1)
    p = torch.softmax(a + log_w, dim=-1)
    return p @ values

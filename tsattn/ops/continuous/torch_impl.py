"""PyTorch path of continuous attention: any device, fp32/bf16/fp16 (computed in fp32) and fp64.

It uses the *segment form* in the exponential domain. With the row max m subtracted,
e_j = exp(a_j - m), and for interval i (knots i-1 and i, d = a_i - a_{i-1}, length dt_i):

    cL_i = dt_i e_{i-1} phi2(d)    -> weight of knot i-1     = dt_i (e_i - e_{i-1}(1 + d)) / d^2
    cR_i = dt_i e_i     phi2(-d)   -> weight of knot i       = dt_i (e_{i-1} - e_i(1 - d)) / d^2

so u_j = cL_{j+1} + cR_j = exp(a_j + b_j - m) and o = (u @ V) / sum(u). The closed forms need
one exp per knot and no logarithm; for |d| < SERIES_RADIUS they cancel, and the Taylor series
of phi2 is used instead. Large |d| is exact in this form even when e_{i-1} or e_i underflows.

Backward (derived from the same form): with gU_j = dL/du_j = (dO . v_j - dO . o) / s and
g_i = dt_i e_{i-1} phi2'(d) = dt_i e_i phi2'(-d) (the two are equal),

    dL/da_j = gU_j u_j + g_{j+1} (gU_{j+1} - gU_j) - g_j (gU_j - gU_{j-1})
    dL/d dt_i = (gU_{i-1} cL_i + gU_i cR_i) / dt_i

and the usual dq = scale dA K, dK = scale dA^T q, dV = P^T dO with P = u / s.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .phi import SERIES_RADIUS, dphi2_coefficients, horner, horner_even_odd, phi2_coefficients, series_degree


def _interval_mask(n: int, device: torch.device) -> torch.Tensor:
    """[N, N] bool: query t (row) sees interval column c (interval c + 1) iff c <= t."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def _segment_weights(a: torch.Tensor, causal: bool, need_grad_terms: bool):
    """Exponential-domain interval weights from scores a [B, H, N, N+1].

    Returns (m, cL0, cR0, g0): the row max [B, H, N, 1] and, per interval [B, H, N, N] and
    *without* the factor dt, e_{i-1} phi2(d), e_i phi2(-d) and e_{i-1} phi2'(d) (None unless asked).
    Intervals a causal query does not see are zero.
    """
    n = a.shape[-2]
    if causal:
        knot_seen = torch.ones(n, n + 1, dtype=torch.bool, device=a.device).tril(1)
        m = a.masked_fill(~knot_seen, float("-inf")).amax(dim=-1, keepdim=True)
    else:
        m = a.amax(dim=-1, keepdim=True)
    e = torch.exp((a - m).clamp(max=0.0))          # unseen knots can exceed m; clamp keeps them finite
    e_left, e_right = e[..., :-1], e[..., 1:]
    d = a[..., 1:] - a[..., :-1]

    r = SERIES_RADIUS
    degree = series_degree(a.dtype)
    small = d.abs() < r
    d_small = torch.where(small, d, 0.0)
    d_large = torch.where(small, r, d)
    inv = 1.0 / d_large
    inv2 = inv * inv
    p2_pos, p2_neg = horner_even_odd(d_small, phi2_coefficients(degree))
    cL = torch.where(small, e_left * p2_pos, (e_right - e_left * (1.0 + d_large)) * inv2)
    cR = torch.where(small, e_right * p2_neg, (e_left - e_right * (1.0 - d_large)) * inv2)
    g = None
    if need_grad_terms:
        dp2 = horner(d_small, dphi2_coefficients(degree))
        g = torch.where(small, e_left * dp2, (e_right * (d_large - 2.0) + e_left * (d_large + 2.0)) * inv2 * inv)
    if causal:
        seen = _interval_mask(n, a.device)
        cL, cR = cL * seen, cR * seen
        g = g * seen if g is not None else None
    return m, cL, cR, g


def _knot_weights(cL: torch.Tensor, cR: torch.Tensor) -> torch.Tensor:
    """u_j = cL_{j+1} + cR_j: [B, H, N, N] per interval -> [B, H, N, N+1] per knot."""
    return F.pad(cL, (0, 1)) + F.pad(cR, (1, 0))


def continuous_attention_forward(
    q, keys, values, dt, causal: bool, scale: float, need_grad_terms: bool = False, need_dt_grad: bool = False
):
    """Forward on full knot tensors: q [B,H,N,D], keys [B,H,N+1,D], values [B,H,N+1,Dv], dt [B,N].

    Returns (o, saved): saved holds (P, g/s) when ``need_grad_terms``, plus (cL/dt/s, cR/dt/s) when
    ``need_dt_grad``; all [B, H, N, N(+1)].
    """
    a = scale * (q @ keys.transpose(-1, -2))                       # [B, H, N, N+1]
    spacing = dt[:, None, None, :]                                 # [B, 1, 1, N]
    m, cL0, cR0, g0 = _segment_weights(a, causal, need_grad_terms or need_dt_grad)
    u = _knot_weights(cL0 * spacing, cR0 * spacing)                # [B, H, N, N+1]
    s = u.sum(dim=-1, keepdim=True)                                # [B, H, N, 1]
    p = u / s
    o = p @ values                                                 # [B, H, N, Dv]
    saved = ()
    if need_grad_terms or need_dt_grad:
        saved = (p, g0 * spacing / s)
    if need_dt_grad:
        saved += (cL0 / s, cR0 / s)
    return o, saved


def continuous_attention_backward(do, q, keys, values, o, saved, scale: float, need_dt_grad: bool):
    """Gradients (dq, dkeys, dvalues, ddt or None) from the saved forward terms."""
    p, g = saved[:2]                                               # both already divided by s
    delta = (do * o).sum(dim=-1, keepdim=True)                     # [B, H, N, 1]
    gp = do @ values.transpose(-1, -2) - delta                     # [B, H, N, N+1] = s * gU
    jump = gp[..., 1:] - gp[..., :-1]                              # [B, H, N, N]  per interval
    gd = g * jump
    da = gp * p + F.pad(gd, (0, 1)) - F.pad(gd, (1, 0))           # dL/da  [B, H, N, N+1]
    dq = scale * (da @ keys)
    dkeys = scale * (da.transpose(-1, -2) @ q)
    dvalues = p.transpose(-1, -2) @ do
    ddt = None
    if need_dt_grad:
        cL, cR = saved[2:]
        ddt = (gp[..., :-1] * cL + gp[..., 1:] * cR).sum(dim=(1, 2))  # [B, N]
    return dq, dkeys, dvalues, ddt


class ContinuousAttentionTorch(torch.autograd.Function):
    """autograd.Function over the full knot tensors (sink already concatenated)."""

    @staticmethod
    def forward(ctx, q, keys, values, dt, causal: bool, scale: float):
        need = any(ctx.needs_input_grad[:3])
        need_dt = ctx.needs_input_grad[3]
        o, saved = continuous_attention_forward(
            q, keys, values, dt, causal, scale, need_grad_terms=need, need_dt_grad=need_dt
        )
        if need or need_dt:
            ctx.save_for_backward(q, keys, values, o, *saved)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, keys, values, o, *saved = ctx.saved_tensors
        dq, dkeys, dvalues, ddt = continuous_attention_backward(
            do, q, keys, values, o, saved, ctx.scale, need_dt_grad=ctx.needs_input_grad[3]
        )
        return dq, dkeys, dvalues, ddt, None, None


def continuous_attention_torch(q, k, v, k0, v0, *, causal: bool, scale: float, dt: torch.Tensor) -> torch.Tensor:
    """Continuous attention with expanded k0 [B,H,1,D], v0 [B,H,1,Dv] and dt [B,N]; fp64 stays fp64,
    other float dtypes are computed in fp32 and returned in their own dtype."""
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    keys = torch.cat([k0, k], dim=-2).to(compute)
    values = torch.cat([v0, v], dim=-2).to(compute)
    o = ContinuousAttentionTorch.apply(q.to(compute), keys, values, dt.to(compute), causal, scale)
    return o.to(q.dtype)

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

Ragged rows (``key_lengths``) and causal attention both come down to the last knot hi a query row
sees: intervals past it get zero spacing and knots past it are left out of the row max. A row with
hi = 0 sees the sink alone, with weight u_0 = e_0 = 1 (o = v0), and its gradient comes out of the
same formulas (gU_0 = 0, no interval terms). Padded keys, values and spacings are replaced by zeros
(ones for dt) before the op, so they are never read into a result and get exactly zero gradient.

Like flash attention, only O and the log-sum-exp are saved; the backward recomputes the weights.
In eager mode the work is cut into blocks of (batch*head, query rows) whose M x N temporaries
stay small (a few MB), and a causal query block only reads the knots it can see. Under
``torch.compile`` the whole problem is one block and inductor fuses the elementwise work.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .phi import SERIES_RADIUS, dphi2_coefficients, horner, horner_even_odd, phi2_coefficients, series_degree

# Elements of one [rows, knots] score block in eager mode: 2^18 fp32 = 1 MiB per temporary.
BLOCK_ELEMENTS = 1 << 18
# Largest query block for causal attention (smaller blocks skip more unseen knots).
CAUSAL_QUERY_BLOCK = 128


def _segment_weights(a: torch.Tensor, dt: torch.Tensor, hi: Optional[torch.Tensor], need_grad_terms: bool):
    """Exponential-domain weights from a block of scores a [G, R, K] (R query rows, knots 0..K-1)
    and the spacings dt [G, K-1] of its intervals.

    ``hi``: None (every row sees every knot) or integers broadcastable to [G, R, 1], the last knot
    each row sees; knots past it are left out of the row max and their intervals are zero.
    Returns (m, cL, cR, g): the row max [G, R, 1] over seen knots and, per interval [G, R, K-1],
    dt e_{i-1} phi2(d), dt e_i phi2(-d) and dt e_{i-1} phi2'(d) (None unless asked).
    """
    knots = a.shape[-1]
    if hi is None:
        m = a.amax(dim=-1, keepdim=True)
    else:
        knot = torch.arange(knots, device=a.device)
        m = a.masked_fill(knot > hi, float("-inf")).amax(dim=-1, keepdim=True)
    e = torch.exp((a - m).clamp(max=0.0))          # unseen knots can exceed m; clamp keeps them finite
    e_left, e_right = e[..., :-1], e[..., 1:]
    d = a[..., 1:] - a[..., :-1]

    r = SERIES_RADIUS
    degree = series_degree(a.dtype)
    small = d.abs() < r
    d_small = d.clamp(-r, r)                               # series argument (used where |d| < r)
    d_large = torch.copysign(d.abs().clamp(min=r), d)      # closed-form argument (used where |d| >= r)
    inv = d_large.reciprocal()
    inv2 = inv * inv
    p2_pos, p2_neg = horner_even_odd(d_small, phi2_coefficients(degree))
    cL = torch.where(small, e_left * p2_pos, (e_right - e_left * (1.0 + d_large)) * inv2)
    cR = torch.where(small, e_right * p2_neg, (e_left - e_right * (1.0 - d_large)) * inv2)
    g = None
    if need_grad_terms:
        dp2 = horner(d_small, dphi2_coefficients(degree))
        g = torch.where(small, e_left * dp2, (e_right * (d_large - 2.0) + e_left * (d_large + 2.0)) * inv2 * inv)
    spacing = dt[:, None, :]
    if hi is not None:
        spacing = spacing * (knot[1:] <= hi)              # interval i (column i - 1) seen iff i <= hi
    cL, cR = cL * spacing, cR * spacing
    g = g * spacing if g is not None else None
    return m, cL, cR, g


def _knot_weights(cL: torch.Tensor, cR: torch.Tensor, hi: Optional[torch.Tensor], ragged: bool) -> torch.Tensor:
    """u_j = cL_{j+1} + cR_j: [..., K-1] per interval -> [..., K] per knot. With ``ragged`` rows a
    row whose last knot hi is 0 sees the sink alone: u_0 = e_0 = 1 (the row max is a_0)."""
    u = F.pad(cL, (0, 1)) + F.pad(cR, (1, 0))
    if ragged:
        u[..., :1] += (hi == 0).to(u.dtype)
    return u


def _block_forward(q, keys, values, dt, hi, ragged, scale):
    """q [G, R, D], keys [G, K, D], values [G, K, Dv], dt [G, K-1] -> o [G, R, Dv], lse [G, R, 1]."""
    a = scale * (q @ keys.transpose(-1, -2))                       # [G, R, K]
    m, cL, cR, _ = _segment_weights(a, dt, hi, need_grad_terms=False)
    u = _knot_weights(cL, cR, hi, ragged)                          # [G, R, K]
    s = u.sum(dim=-1, keepdim=True)
    return (u @ values) / s, m + torch.log(s)


def _block_backward(do, q, keys, values, o, lse, dt, hi, ragged, scale, need_dt_grad):
    """Recompute the block's weights and return (dq, dkeys, dvalues, ddt or None)."""
    a = scale * (q @ keys.transpose(-1, -2))                       # [G, R, K]
    m, cL, cR, g = _segment_weights(a, dt, hi, need_grad_terms=True)
    inv_s = torch.exp(m - lse)                                     # 1 / sum(u), u relative to m
    p = _knot_weights(cL, cR, hi, ragged) * inv_s                  # [G, R, K]
    delta = (do * o).sum(dim=-1, keepdim=True)                     # [G, R, 1]
    gp = do @ values.transpose(-1, -2) - delta                     # [G, R, K] = s * dL/du
    gd = (g * inv_s) * (gp[..., 1:] - gp[..., :-1])                # [G, R, K-1]
    da = gp * p + F.pad(gd, (0, 1)) - F.pad(gd, (1, 0))           # dL/da
    dq = scale * (da @ keys)
    dkeys = scale * (da.transpose(-1, -2) @ q)
    dvalues = p.transpose(-1, -2) @ do
    ddt = None
    if need_dt_grad:
        ddt = ((gp[..., :-1] * cL + gp[..., 1:] * cR) * inv_s).sum(dim=-2) / dt   # [G, K-1]
    return dq, dkeys, dvalues, ddt


def _last_knots(lengths: Optional[torch.Tensor], gs: slice, q0: int, q1: int, causal: bool, device):
    """The last knot hi each query row of a block sees: [1, R, 1] (causal), [G, 1, 1] (lengths),
    both (their minimum), or None (every knot)."""
    hi = None
    if causal:                                                     # query t is knot t + 1
        hi = torch.arange(q0 + 1, q1 + 1, device=device)[None, :, None]
    if lengths is not None:
        lens = lengths[gs, None, None]
        hi = lens if hi is None else torch.minimum(hi, lens)
    return hi


def _blocks(groups: int, m: int, n: int, causal: bool):
    """Yield (group slice, query start, query end, knots) tiles covering [groups, m queries] against
    n + 1 knots (causal: m == n, and a block of queries ending at q_end reads knots 0..q_end)."""
    if torch.compiler.is_compiling():
        yield slice(0, groups), 0, m, n + 1
        return
    rows = max(16, min(m, BLOCK_ELEMENTS // (n + 1)))
    if causal:
        rows = min(rows, CAUSAL_QUERY_BLOCK)
    for q_start in range(0, m, rows):
        q_end = min(m, q_start + rows)
        knots = q_end + 1 if causal else n + 1                     # knots 0..q_end are all a causal block sees
        per_group = max(1, BLOCK_ELEMENTS // ((q_end - q_start) * knots))
        for g0 in range(0, groups, per_group):
            yield slice(g0, min(groups, g0 + per_group)), q_start, q_end, knots


class ContinuousAttentionTorch(torch.autograd.Function):
    """autograd.Function over flattened knot tensors: q [G, M, D], keys [G, N+1, D],
    values [G, N+1, Dv], dt [G, N] and lengths [G] or None (G = batch * heads, sink at knot 0)."""

    @staticmethod
    def forward(ctx, q, keys, values, dt, lengths, causal: bool, scale: float):
        groups, m, _ = q.shape
        n = keys.shape[1] - 1
        ragged = lengths is not None
        o = q.new_empty(groups, m, values.shape[-1])
        lse = q.new_empty(groups, m, 1)
        for gs, q0, q1, kn in _blocks(groups, m, n, causal):
            hi = _last_knots(lengths, gs, q0, q1, causal, q.device)
            o[gs, q0:q1], lse[gs, q0:q1] = _block_forward(
                q[gs, q0:q1], keys[gs, :kn], values[gs, :kn], dt[gs, : kn - 1], hi, ragged, scale
            )
        ctx.save_for_backward(q, keys, values, dt, o, lse, lengths)
        ctx.causal, ctx.scale = causal, scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, keys, values, dt, o, lse, lengths = ctx.saved_tensors
        need_dt = ctx.needs_input_grad[3]
        groups, m, _ = q.shape
        n = keys.shape[1] - 1
        do = do.to(q.dtype)
        dq, dkeys, dvalues = torch.zeros_like(q), torch.zeros_like(keys), torch.zeros_like(values)
        ddt = torch.zeros_like(dt) if need_dt else None
        for gs, q0, q1, kn in _blocks(groups, m, n, ctx.causal):
            hi = _last_knots(lengths, gs, q0, q1, ctx.causal, q.device)
            bq, bk, bv, bdt = _block_backward(
                do[gs, q0:q1], q[gs, q0:q1], keys[gs, :kn], values[gs, :kn], o[gs, q0:q1], lse[gs, q0:q1],
                dt[gs, : kn - 1], hi, lengths is not None, ctx.scale, need_dt,
            )
            dq[gs, q0:q1] = bq
            dkeys[gs, :kn] += bk
            dvalues[gs, :kn] += bv
            if need_dt:
                ddt[gs, : kn - 1] += bdt
        return dq, dkeys, dvalues, ddt, None, None, None


def continuous_attention_torch(
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
    """Continuous attention with q [B,H,M,D], k [B,H,N,D], v [B,H,N,Dv], expanded k0 [B,H,1,D],
    v0 [B,H,1,Dv], dt [B,N] and key_lengths [B] (in [0, N]) or None -> [B,H,M,Dv]; fp64 stays fp64,
    other float dtypes are computed in fp32 and returned in their own dtype."""
    b, h, m, d = q.shape
    n = k.shape[-2]
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    lengths = None
    if key_lengths is not None:
        # padding replaced by zeros (dt: ones): never read into a result, zero gradient by construction
        kept = torch.arange(n, device=q.device) < key_lengths[:, None]             # [B, N]
        k = torch.where(kept[:, None, :, None], k, 0.0)
        v = torch.where(kept[:, None, :, None], v, 0.0)
        dt = torch.where(kept, dt, 1.0)
        lengths = key_lengths[:, None].expand(b, h).reshape(b * h)
    keys = torch.cat([k0, k], dim=-2).to(compute).reshape(b * h, n + 1, d)
    values = torch.cat([v0, v], dim=-2).to(compute).reshape(b * h, n + 1, v.shape[-1])
    spacing = dt.to(compute)[:, None, :].expand(b, h, n).reshape(b * h, n)
    o = ContinuousAttentionTorch.apply(
        q.to(compute).reshape(b * h, m, d), keys, values, spacing, lengths, causal, scale
    )
    return o.reshape(b, h, m, v.shape[-1]).to(q.dtype)

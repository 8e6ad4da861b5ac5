"""Triton forward kernel of continuous attention, and the elementwise helpers both passes share.

Segment form, exponential domain (see torch_impl.py and docs/continuous-attention.md). Keys and
values are the full knot tensors (sink at knot 0, so N + 1 rows); interval column c = 0..N-1 joins
knot c ("prev") and knot c + 1 ("cur") and has length dt[b, c]. For a tile of queries x intervals:

    a_p = scale q . keys[c],   a_c = scale q . keys[c + 1],   d = a_c - a_p
    e_p = exp(a_p - m),        e_c = exp(a_c - m)            (m: running row max over seen knots)
    cL  = dt e_p phi2(d)  -> weight of knot c            cR = dt e_c phi2(-d) -> weight of knot c + 1
    num += cL @ values[c] + cR @ values[c + 1],   den += cL + cR

so a key block needs a one-knot halo on its left, which here is a second, shifted score tile
(keys rows c instead of c + 1): two QK dots, two PV dots and two exp2 per interval element
(every knot's score is computed in two tiles). phi2(+-d) come from one even/odd Horner pass for
|d| < SERIES_RADIUS and from the closed forms outside; both are computed and selected (no
divergent branches). Nothing N x N is stored: the pass keeps O and the row log-sum-exp
LSE = m + log(den) (natural log) for the backward. The kernels assume scale >= 0 and dt scaled
to max 1 per batch row; function.py arranges both.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .phi import SERIES_RADIUS, dphi2_coefficients, phi2_coefficients, series_degree

# ---------------------------------------------------------------------------------------------
# Constants: fp32 compute for every input dtype, with phi.py's fp32 series radius and degree
# ---------------------------------------------------------------------------------------------
_DEGREE = series_degree(torch.float32)
_P2 = phi2_coefficients(_DEGREE)          # 1 / (k+2)!,      k = 0..degree
_DP2 = dphi2_coefficients(_DEGREE)        # (k+1) / (k+3)!,  k = 0..degree
assert _DEGREE >= 3, "the Horner helper needs at least two coefficients per parity"

LOG2E = tl.constexpr(1.4426950408889634)
SERIES_R = tl.constexpr(float(SERIES_RADIUS))
# Series split by parity: p(x) = even(x^2) + x odd(x^2), so p(-x) costs one subtraction more.
P2_EVEN = tl.constexpr(tuple(_P2[0::2]))
P2_ODD = tl.constexpr(tuple(_P2[1::2]))
DP2_EVEN = tl.constexpr(tuple(_DP2[0::2]))
DP2_ODD = tl.constexpr(tuple(_DP2[1::2]))
N_P2_EVEN = tl.constexpr(len(_P2[0::2]))
N_P2_ODD = tl.constexpr(len(_P2[1::2]))
N_DP2_EVEN = tl.constexpr(len(_DP2[0::2]))
N_DP2_ODD = tl.constexpr(len(_DP2[1::2]))


# ---------------------------------------------------------------------------------------------
# Elementwise helpers
# ---------------------------------------------------------------------------------------------
@triton.jit
def _query_tile(N, H, BM: tl.constexpr, CAUSAL: tl.constexpr):
    """(batch, head, first query row) of this program's BM-query tile.

    1-D grid (no 65535 cap on B*H); programs of one head are adjacent, so K/V stay in L2; causal
    tiles go longest rows first."""
    num_m = tl.cdiv(N, BM)
    bh = tl.program_id(0) // num_m
    pid_m = tl.program_id(0) % num_m
    if CAUSAL:
        pid_m = num_m - 1 - pid_m
    return (bh // H).to(tl.int64), (bh % H).to(tl.int64), pid_m * BM


@triton.jit
def _interval_tiles(k_ptrs, v_ptrs, dt_ptrs, s, cols, N, stride_kn, stride_vn, stride_dtn, MASK: tl.constexpr):
    """Keys and values of both ends of intervals [s, s + BN) (knots c and c + 1) and their spacings.

    MASK=True zero-fills rows past N (their contributions vanish; dt is filled with 1)."""
    if MASK:
        cmask = cols < N
        kp = tl.load(k_ptrs + s * stride_kn, mask=cmask[:, None], other=0.0)
        kc = tl.load(k_ptrs + (s + 1) * stride_kn, mask=cmask[:, None], other=0.0)
        vp = tl.load(v_ptrs + s * stride_vn, mask=cmask[:, None], other=0.0)
        vc = tl.load(v_ptrs + (s + 1) * stride_vn, mask=cmask[:, None], other=0.0)
        dtv = tl.load(dt_ptrs + s * stride_dtn, mask=cmask, other=1.0)
    else:
        kp = tl.load(k_ptrs + s * stride_kn)
        kc = tl.load(k_ptrs + (s + 1) * stride_kn)
        vp = tl.load(v_ptrs + s * stride_vn)
        vc = tl.load(v_ptrs + (s + 1) * stride_vn)
        dtv = tl.load(dt_ptrs + s * stride_dtn)
    return kp, kc, vp, vc, dtv


@triton.jit
def _dot(a, b, acc, DOT_PREC: tl.constexpr):
    """a @ b (+ acc) with fp32 accumulation. DOT_PREC is tl.dot's input_precision ("ieee" for
    fp32 inputs; ignored for 16-bit ones) or "upcast": multiply in fp32, which gives the same
    products (a bf16 x bf16 product is exact in fp32). "upcast" exists for Triton's interpreter,
    whose tl.dot (3.7.1) multiplies the raw bf16 bit patterns as uint16 integers."""
    if DOT_PREC == "upcast":
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc, input_precision=DOT_PREC)


@triton.jit
def _horner(x, C: tl.constexpr, NC: tl.constexpr):
    """C[0] + C[1] x + ... + C[NC-1] x^(NC-1), NC >= 2 compile-time coefficients (unrolled FMAs)."""
    acc = x * C[NC - 1] + C[NC - 2]
    for i in tl.static_range(NC - 3, -1, -1):
        acc = acc * x + C[i]
    return acc


@triton.jit
def _phi2_pair_terms(d):
    """Shared part of the segment weights: (small, ds, even, odd, dl, inv, inv2) for d = a_c - a_p.

    For |d| < R: phi2(d) = even + odd, phi2(-d) = even - odd. Else the closed forms use dl = d,
    inv = 1/d (dl is R where the series is used, so nothing divides by 0)."""
    small = tl.abs(d) < SERIES_R
    ds = tl.where(small, d, 0.0)
    dl = tl.where(small, SERIES_R, d)
    inv = tl.fdiv(tl.full(d.shape, 1.0, tl.float32), dl)
    inv2 = inv * inv
    x2 = ds * ds
    even = _horner(x2, P2_EVEN, N_P2_EVEN)
    odd = _horner(x2, P2_ODD, N_P2_ODD) * ds
    return small, ds, even, odd, dl, inv, inv2


@triton.jit
def _segment_weights(d, e_p, e_c):
    """(cL, cR) / dt for one interval per element: e_p phi2(d) and e_c phi2(-d), d = a_c - a_p.

    Large |d| uses cL = (e_c - e_p (1 + d)) / d^2 and cR = (e_p - e_c (1 - d)) / d^2, exact even
    when one of e_p, e_c underflows."""
    small, ds, even, odd, dl, inv, inv2 = _phi2_pair_terms(d)
    cl = tl.where(small, e_p * (even + odd), (e_c - e_p * (1.0 + dl)) * inv2)
    cr = tl.where(small, e_c * (even - odd), (e_p - e_c * (1.0 - dl)) * inv2)
    return cl, cr


@triton.jit
def _segment_weights_and_slope(d, e_p, e_c):
    """(cL, cR, g) / dt with g = e_p phi2'(d) = e_c phi2'(-d); for large |d|, g = (cR - cL) / d
    (from phi2' = (phi1 - 2 phi2) / x and cL + cR = dt e_p phi1(d))."""
    small, ds, even, odd, dl, inv, inv2 = _phi2_pair_terms(d)
    cl = tl.where(small, e_p * (even + odd), (e_c - e_p * (1.0 + dl)) * inv2)
    cr = tl.where(small, e_c * (even - odd), (e_p - e_c * (1.0 - dl)) * inv2)
    x2 = ds * ds
    dev = _horner(x2, DP2_EVEN, N_DP2_EVEN)
    dod = _horner(x2, DP2_ODD, N_DP2_ODD) * ds
    g = tl.where(small, e_p * (dev + dod), (cr - cl) * inv)
    return cl, cr, g


# ---------------------------------------------------------------------------------------------
# Forward kernel
# ---------------------------------------------------------------------------------------------
@triton.jit
def _fwd_inner(
    acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, lo, hi, N, scale, qk_scale,
    stride_kn, stride_vn, stride_dtn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """Interval blocks [s, s + BN) for s in [lo, hi): online softmax over the segment weights.

    s_p, s_c are the raw dots q.k (scale >= 0: the launcher flips q's sign otherwise), m_i their
    running row max; exp2(s qk_scale - m qk_scale) is one FMA, d = (s_c - s_p) scale one more
    multiply. MASK=False is the fast path for blocks every row of the query block sees in full."""
    for s in range(lo, hi, BN):
        cols = s + offs_n
        kp, kc, vp, vc, dtv = _interval_tiles(kp_ptrs, vp_ptrs, dt_ptrs, s, cols, N,
                                              stride_kn, stride_vn, stride_dtn, MASK)
        s_p = _dot(q, tl.trans(kp), None, DOT_PREC)
        s_c = _dot(q, tl.trans(kc), None, DOT_PREC)
        top = tl.maximum(s_p, s_c)
        if MASK:
            valid = (cols < N)[None, :]
            if CAUSAL:
                valid = valid & (cols[None, :] <= rows[:, None])
            top = tl.where(valid, top, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(top, 1))
        m2 = (m_new * qk_scale)[:, None]
        e_p = tl.exp2(s_p * qk_scale - m2)
        e_c = tl.exp2(s_c * qk_scale - m2)
        cl, cr = _segment_weights((s_c - s_p) * scale, e_p, e_c)
        cl = cl * dtv[None, :]
        cr = cr * dtv[None, :]
        if MASK:
            cl = tl.where(valid, cl, 0.0)
            cr = tl.where(valid, cr, 0.0)
        alpha = tl.exp2((m_i - m_new) * qk_scale)
        l_i = l_i * alpha + tl.sum(cl + cr, 1)
        acc = acc * alpha[:, None]
        acc = _dot(cl.to(vp.dtype), vp, acc, DOT_PREC)
        acc = _dot(cr.to(vc.dtype), vc, acc, DOT_PREC)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _fwd_kernel(
    Q, KEYS, VALUES, DT, O, LSE,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_ob, stride_oh, stride_on, stride_od,
    N, H, scale,
    CAUSAL: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """One program: BM queries of one (batch, head); O [B,H,N,DV] and LSE [B,H,N] (fp32)."""
    b, h, t0 = _query_tile(N, H, BM, CAUSAL)
    rows = t0 + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    offs_dv = tl.arange(0, DV)
    rmask = rows < N

    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                mask=rmask[:, None], other=0.0)
    kp_ptrs = KEYS + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    vp_ptrs = VALUES + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    dt_ptrs = DT + b * stride_dtb + offs_n * stride_dtn

    m_i = tl.full([BM], -1e30, tl.float32)   # finite: (m_i - m_new) * qk_scale is 0, not NaN, at scale 0
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DV], tl.float32)
    qk_scale = scale * LOG2E
    # Interval c is fully seen by the block iff c < N and (causal) c <= t0.
    if CAUSAL:
        lim = tl.minimum(N, t0 + 1)
        hi = tl.minimum(N, t0 + BM)
    else:
        lim = N
        hi = N
    full_end = (lim // BN) * BN
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, 0, full_end, N,
                               scale, qk_scale, stride_kn, stride_vn, stride_dtn, CAUSAL, False, BN, DOT_PREC)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, full_end, hi, N,
                               scale, qk_scale, stride_kn, stride_vn, stride_dtn, CAUSAL, True, BN, DOT_PREC)

    o = acc / l_i[:, None]
    tl.store(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + offs_dv[None, :] * stride_od,
             o.to(O.dtype.element_ty), mask=rmask[:, None])
    tl.store(LSE + (b * H + h) * N + rows, m_i * scale + tl.log(l_i), mask=rmask)   # natural log

"""Triton forward kernel of continuous attention, and the elementwise helpers both passes share.

Segment form, exponential domain (see torch_impl.py and docs/continuous-attention.md). M queries;
keys and values are the full knot tensors (sink at knot 0, so N + 1 rows); interval column
c = 0..N-1 joins knot c ("prev") and knot c + 1 ("cur") and has length dt[b, c]. Batch row b uses
intervals c < NV = min(N, key_lengths[b]) only: every interval mask tests c < NV (N without
lengths), so padded keys, values and spacings are never loaded, and loops stop at NV. A row with
NV = 0 sees the sink alone (o = v0, LSE = scale q . k0). Head dims D, DV are any size <= 128:
tiles are DP, DVP wide (a power of two >= 16) and masked loads fill the extra columns with zeros,
which add nothing to q . k and give output columns that are never stored. For a tile of queries x
intervals:

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
def _query_tile(M, H, BM: tl.constexpr, CAUSAL: tl.constexpr):
    """(batch, head, first query row) of this program's BM-query tile (M queries per head).

    1-D grid (no 65535 cap on B*H); programs of one head are adjacent, so K/V stay in L2; causal
    tiles go longest rows first."""
    num_m = tl.cdiv(M, BM)
    bh = tl.program_id(0) // num_m
    pid_m = tl.program_id(0) % num_m
    if CAUSAL:
        pid_m = num_m - 1 - pid_m
    return (bh // H).to(tl.int64), (bh % H).to(tl.int64), pid_m * BM


@triton.jit
def _valid_intervals(LENS, b, N, HAS_LENS: tl.constexpr):
    """NV: how many intervals batch row b integrates over, min(N, key_lengths[b]) (N without lengths)."""
    if HAS_LENS:
        nv = tl.minimum(tl.load(LENS + b), N)
    else:
        nv = N
    return nv


@triton.jit
def _load_tile(ptrs, row_ok, offs_c, COLS: tl.constexpr, BC: tl.constexpr, MASK_ROWS: tl.constexpr):
    """A [R, BC] tile: rows where ``row_ok`` (MASK_ROWS=True; else every row is read), columns
    >= COLS (zero padding of a head dim COLS to the tile width BC) read as 0."""
    if MASK_ROWS:
        if COLS < BC:
            t = tl.load(ptrs, mask=row_ok[:, None] & (offs_c[None, :] < COLS), other=0.0)
        else:
            t = tl.load(ptrs, mask=row_ok[:, None], other=0.0)
    else:
        if COLS < BC:
            t = tl.load(ptrs, mask=offs_c[None, :] < COLS, other=0.0)
        else:
            t = tl.load(ptrs)
    return t


@triton.jit
def _store_tile(ptrs, x, row_ok, offs_c, COLS: tl.constexpr, BC: tl.constexpr):
    """Store the rows of a [R, BC] tile where ``row_ok``, columns < COLS only."""
    if COLS < BC:
        tl.store(ptrs, x, mask=row_ok[:, None] & (offs_c[None, :] < COLS))
    else:
        tl.store(ptrs, x, mask=row_ok[:, None])


@triton.jit
def _interval_tiles(k_ptrs, v_ptrs, dt_ptrs, s, cols, NV, stride_kn, stride_vn, stride_dtn, offs_d, offs_dv,
                    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr, MASK: tl.constexpr):
    """Keys and values of both ends of intervals [s, s + BN) (knots c and c + 1) and their spacings.

    MASK=True zero-fills intervals c >= NV (their contributions vanish; dt is filled with 1), so
    nothing past a row's length is read."""
    cmask = cols < NV
    kp = _load_tile(k_ptrs + s * stride_kn, cmask, offs_d, D, DP, MASK)
    kc = _load_tile(k_ptrs + (s + 1) * stride_kn, cmask, offs_d, D, DP, MASK)
    vp = _load_tile(v_ptrs + s * stride_vn, cmask, offs_dv, DV, DVP, MASK)
    vc = _load_tile(v_ptrs + (s + 1) * stride_vn, cmask, offs_dv, DV, DVP, MASK)
    if MASK:
        dtv = tl.load(dt_ptrs + s * stride_dtn, mask=cmask, other=1.0)
    else:
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
    acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv, lo, hi, NV, scale, qk_scale,
    stride_kn, stride_vn, stride_dtn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
):
    """Interval blocks [s, s + BN) for s in [lo, hi): online softmax over the segment weights.

    s_p, s_c are the raw dots q.k (scale >= 0: the launcher flips q's sign otherwise), m_i their
    running row max; exp2(s qk_scale - m qk_scale) is one FMA, d = (s_c - s_p) scale one more
    multiply. MASK=False is the fast path for blocks every row of the query block sees in full
    (all intervals < NV, and causal: <= every row)."""
    for s in range(lo, hi, BN):
        cols = s + offs_n
        kp, kc, vp, vc, dtv = _interval_tiles(kp_ptrs, vp_ptrs, dt_ptrs, s, cols, NV,
                                              stride_kn, stride_vn, stride_dtn, offs_d, offs_dv,
                                              D, DP, DV, DVP, MASK)
        s_p = _dot(q, tl.trans(kp), None, DOT_PREC)
        s_c = _dot(q, tl.trans(kc), None, DOT_PREC)
        top = tl.maximum(s_p, s_c)
        if MASK:
            valid = (cols < NV)[None, :]
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
def _fwd_rows(
    q, kp_ptrs, vp_ptrs, dt_ptrs, rows, t0, offs_n, offs_d, offs_dv, nv, scale,
    stride_kn, stride_vn, stride_dtn,
    CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
):
    """Online-softmax state (acc [BM, DVP], l_i, m_i) of a query block over the intervals c < nv it
    sees (nv >= 1): first the blocks every row sees in full (unmasked), then the rest (masked);
    o = acc / l_i and LSE = m_i scale + log(l_i)."""
    m_i = tl.full([BM], -1e30, tl.float32)   # finite: (m_i - m_new) * qk_scale is 0, not NaN, at scale 0
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DVP], tl.float32)
    qk_scale = scale * LOG2E
    # Interval c is fully seen by the block iff c < nv and (causal) c <= t0.
    if CAUSAL:
        lim = tl.minimum(nv, t0 + 1)
        hi = tl.minimum(nv, t0 + BM)
    else:
        lim = nv
        hi = nv
    full_end = (lim // BN) * BN
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv,
                               0, full_end, nv, scale, qk_scale, stride_kn, stride_vn, stride_dtn,
                               CAUSAL, False, BN, DOT_PREC, D, DP, DV, DVP)
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, kp_ptrs, vp_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv,
                               full_end, hi, nv, scale, qk_scale, stride_kn, stride_vn, stride_dtn,
                               CAUSAL, True, BN, DOT_PREC, D, DP, DV, DVP)
    return acc, l_i, m_i


@triton.jit
def _lone_sink(q, k_base, v_base, offs_d, offs_dv, stride_kd, stride_vd, scale,
               BM: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr):
    """(o, LSE) of query rows that see the sink alone (no interval): o = v0, LSE = scale q . k0."""
    k0 = tl.load(k_base + offs_d * stride_kd, mask=offs_d < D, other=0.0).to(tl.float32)
    v0 = tl.load(v_base + offs_dv * stride_vd, mask=offs_dv < DV, other=0.0).to(tl.float32)
    o = tl.zeros([BM, DVP], tl.float32) + v0[None, :]
    return o, tl.sum(q.to(tl.float32) * k0[None, :], 1) * scale


@triton.jit
def _fwd_kernel(
    Q, KEYS, VALUES, DT, LENS, O, LSE,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_ob, stride_oh, stride_on, stride_od,
    M, N, H, scale,
    CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """One program: BM queries of one (batch, head); O [B,H,M,DV] and LSE [B,H,M] (fp32).
    LENS: [B] int32 valid keys per batch row (read only when HAS_LENS); causal needs M == N."""
    b, h, t0 = _query_tile(M, H, BM, CAUSAL)
    rows = t0 + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, DP)
    offs_dv = tl.arange(0, DVP)
    rmask = rows < M
    nv = _valid_intervals(LENS, b, N, HAS_LENS)

    q = _load_tile(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                   rmask, offs_d, D, DP, True)
    k_base = KEYS + b * stride_kb + h * stride_kh
    v_base = VALUES + b * stride_vb + h * stride_vh
    kp_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    vp_ptrs = v_base + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    dt_ptrs = DT + b * stride_dtb + offs_n * stride_dtn

    o_ptrs = O + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + offs_dv[None, :] * stride_od
    lse_ptrs = LSE + (b * H + h) * M + rows
    if HAS_LENS:
        if nv == 0:   # no interval: the row integrates over the point tau_0, the sink alone (weight 1)
            o, lse = _lone_sink(q, k_base, v_base, offs_d, offs_dv, stride_kd, stride_vd, scale, BM, D, DV, DVP)
        else:
            acc, l_i, m_i = _fwd_rows(q, kp_ptrs, vp_ptrs, dt_ptrs, rows, t0, offs_n, offs_d, offs_dv, nv, scale,
                                      stride_kn, stride_vn, stride_dtn, CAUSAL, BM, BN, DOT_PREC, D, DP, DV, DVP)
            o = acc / l_i[:, None]
            lse = m_i * scale + tl.log(l_i)
        _store_tile(o_ptrs, o.to(O.dtype.element_ty), rmask, offs_dv, DV, DVP)
        tl.store(lse_ptrs, lse, mask=rmask)
    else:
        acc, l_i, m_i = _fwd_rows(q, kp_ptrs, vp_ptrs, dt_ptrs, rows, t0, offs_n, offs_d, offs_dv, nv, scale,
                                  stride_kn, stride_vn, stride_dtn, CAUSAL, BM, BN, DOT_PREC, D, DP, DV, DVP)
        _store_tile(o_ptrs, (acc / l_i[:, None]).to(O.dtype.element_ty), rmask, offs_dv, DV, DVP)
        tl.store(lse_ptrs, m_i * scale + tl.log(l_i), mask=rmask)                 # natural log

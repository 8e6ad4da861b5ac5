"""Triton backward kernels of continuous attention (segment form; see triton_fwd.py for notation).

With P-like weights normalised by the saved LSE (cL = dt exp(a_p - LSE) phi2(d), etc.),
gp = dO . v - delta (delta = rowsum(dO * O)) and g = dt exp(a_p - LSE) phi2'(d), each interval
c contributes to the score gradients of its two knots:

    dA_p = gp_p cL + g (gp_c - gp_p)      (knot c)
    dA_c = gp_c cR - g (gp_c - gp_p)      (knot c + 1)

the segment-form version of dL/da_j = gU_j u_j + g_{j+1}(gU_{j+1} - gU_j) - g_j(gU_j - gU_{j-1}).
Then dq = scale (dA_p @ K_p + dA_c @ K_c), dK = scale dA^T q, dV = [cL | cR]^T dO and
d dt_c = sum over queries and heads of (gp_p cL + gp_c cR) / dt_c.

M queries, N intervals; intervals c >= NV = min(N, key_lengths[b]) are masked like columns past N
(never loaded, zero gradient written), and a row with NV = 0 (the sink alone, weight 1) gets
d v0 = sum of dO over its queries and nothing else. Head dims are zero-padded in registers to
DP, DVP as in the forward; stores keep the real D, DV columns.

Kernels:
  _bwd_preprocess   delta = rowsum(dO * O)                                   grid (M/BM * B*H)
  _bwd_dkdv_kernel  one program per interval block [s, s+BN), loops over query blocks;
                    writes dK/dV of the block's left knots (c) and right knots (c+1) to two
                    interval-indexed fp32 buffers, so that no knot is written by two programs
                    (the host adds them: one O(N D) pass); optionally dq by fp32 atomics
  _bwd_dq_kernel    one program per query block, loops over interval blocks (used when dq is
                    not accumulated by atomics: deterministic, at the cost of recomputing the
                    elementwise work)
"""
from __future__ import annotations

import triton
import triton.language as tl

from .triton_fwd import (
    LOG2E,
    _dot,
    _interval_tiles,
    _load_tile,
    _query_tile,
    _segment_weights_and_slope,
    _store_tile,
    _valid_intervals,
)


@triton.jit
def _bwd_preprocess(
    O, DO, DELTA,
    stride_ob, stride_oh, stride_on, stride_od,
    stride_dob, stride_doh, stride_don, stride_dod,
    M, H,
    DV: tl.constexpr, DVP: tl.constexpr, BM: tl.constexpr,
):
    """delta[b, h, t] = sum_d dO * O (fp32), DELTA contiguous [B, H, M]."""
    num_m = tl.cdiv(M, BM)
    bh = tl.program_id(0) // num_m
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = (tl.program_id(0) % num_m) * BM + tl.arange(0, BM)
    offs_dv = tl.arange(0, DVP)
    rmask = rows < M
    o = _load_tile(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + offs_dv[None, :] * stride_od,
                   rmask, offs_dv, DV, DVP, True).to(tl.float32)
    do = _load_tile(DO + b * stride_dob + h * stride_doh + rows[:, None] * stride_don + offs_dv[None, :] * stride_dod,
                    rmask, offs_dv, DV, DVP, True).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * M + rows, tl.sum(o * do, 1), mask=rmask)


@triton.jit
def _bwd_dkdv_inner(
    dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
    q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, lo, hi, M, scale,
    stride_qn, stride_don, stride_dqn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BM: tl.constexpr, DOT_PREC: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, HAS_DDT: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
):
    """Query blocks [t0, t0 + BM) for t0 in [lo, hi); tiles are [BN (intervals), BM (queries)].

    MASK=False: every interval of the block is valid (< NV) and seen by every query of the block.
    Rows t >= M load zeros (q, dO, LSE, delta), which makes every contribution of theirs zero."""
    for t0 in range(lo, hi, BM):
        rows = t0 + offs_m
        rmask = rows < M
        q = _load_tile(q_ptrs + t0 * stride_qn, rmask, offs_d, D, DP, True)
        do = _load_tile(do_ptrs + t0 * stride_don, rmask, offs_dv, DV, DVP, True)
        lse = tl.load(lse_ptr + rows, mask=rmask, other=0.0)
        dlt = tl.load(delta_ptr + rows, mask=rmask, other=0.0)
        qT = tl.trans(q)
        doT = tl.trans(do)
        s_p = _dot(kp, qT, None, DOT_PREC)           # [BN, BM] raw q.k (scale >= 0)
        s_c = _dot(kc, qT, None, DOT_PREC)
        lse2 = (lse * LOG2E)[None, :]
        e_p = tl.exp2(s_p * (scale * LOG2E) - lse2)
        e_c = tl.exp2(s_c * (scale * LOG2E) - lse2)
        cl, cr, g = _segment_weights_and_slope((s_c - s_p) * scale, e_p, e_c)
        gp_p = _dot(vp, doT, None, DOT_PREC) - dlt[None, :]   # after the weights: fewer live tiles
        gp_c = _dot(vc, doT, None, DOT_PREC) - dlt[None, :]
        cl = cl * dtv[:, None]
        cr = cr * dtv[:, None]
        g = g * dtv[:, None]
        if MASK:
            valid = cmask[:, None]
            if CAUSAL:
                valid = valid & (cols[:, None] <= rows[None, :])
            cl = tl.where(valid, cl, 0.0)
            cr = tl.where(valid, cr, 0.0)
            g = tl.where(valid, g, 0.0)
        jump = g * (gp_c - gp_p)
        da_p = gp_p * cl + jump
        da_c = gp_c * cr - jump
        dvp = _dot(cl.to(do.dtype), do, dvp, DOT_PREC)
        dvc = _dot(cr.to(do.dtype), do, dvc, DOT_PREC)
        dkp = _dot(da_p.to(q.dtype), q, dkp, DOT_PREC)
        dkc = _dot(da_c.to(q.dtype), q, dkc, DOT_PREC)
        if HAS_DDT:
            ddt += tl.sum(gp_p * cl + gp_c * cr, 1)
        if ATOMIC_DQ:
            dq = _dot(tl.trans(da_p.to(kp.dtype)), kp, None, DOT_PREC)
            dq = _dot(tl.trans(da_c.to(kc.dtype)), kc, dq, DOT_PREC)
            dq_mask = rmask[:, None]
            if D < DP:
                dq_mask = dq_mask & (offs_d[None, :] < D)
            tl.atomic_add(dq_ptrs + t0 * stride_dqn, dq * scale, mask=dq_mask, sem="relaxed")
    return dkp, dkc, dvp, dvc, ddt


@triton.jit
def _bwd_dkdv_block(
    dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, s, cols, cmask, nv,
    q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, M, scale,
    stride_qn, stride_don, stride_dqn,
    CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, HAS_DDT: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
):
    """Accumulate the gradients of intervals [s, s + BN) over the query blocks that see them.

    Query t sees interval c iff c < nv and (causal, M == N) c <= t: start at the block holding
    row s; blocks from t0 >= s + BN - 1 on see all of [s, s + BN). A block with intervals >= nv
    is masked throughout, and one with none below nv has nothing to do."""
    if CAUSAL:
        lo = (s // BM) * BM
        mid = tl.cdiv(s + BN - 1, BM) * BM
    else:
        lo = s * 0
        mid = s * 0
    mid = tl.where(s + BN > nv, M, tl.minimum(mid, M))
    lo = tl.where(s >= nv, M, lo)
    dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_inner(
        dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
        q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, lo, mid, M, scale,
        stride_qn, stride_don, stride_dqn, CAUSAL, True, BM, DOT_PREC, ATOMIC_DQ, HAS_DDT, D, DP, DV, DVP)
    dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_inner(
        dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
        q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, mid, M, M, scale,
        stride_qn, stride_don, stride_dqn, CAUSAL, False, BM, DOT_PREC, ATOMIC_DQ, HAS_DDT, D, DP, DV, DVP)
    return dkp, dkc, dvp, dvc, ddt


@triton.jit
def _lone_sink_dv(dvp, do_ptrs, offs_m, offs_n, offs_dv, M, stride_don,
                  BM: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr):
    """Row 0 of the left-knot dV accumulator (the sink) = sum of dO over all M queries: the
    gradient of v0 for a batch row without intervals, where every query returns v0."""
    lone = tl.zeros([DVP], tl.float32)
    for t0 in range(0, M, BM):
        do = _load_tile(do_ptrs + t0 * stride_don, t0 + offs_m < M, offs_dv, DV, DVP, True)
        lone += tl.sum(do.to(tl.float32), 0)
    return tl.where(offs_n[:, None] == 0, lone[None, :], dvp)


@triton.jit
def _bwd_dkdv_kernel(
    Q, KEYS, VALUES, DT, LENS, DO, LSE, DELTA, DQ, DKL, DKR, DVL, DVR, DDT,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    M, N, H, scale,
    CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, HAS_DDT: tl.constexpr,
):
    """One program: intervals [s, s + BN) of one (batch, head), against all M queries.

    DKL/DVL [B,H,N,D|DV] fp32 (contiguous) get the gradient of knot c, DKR/DVR that of knot c + 1,
    both at row c (zero for c >= NV); DDT [B,H,N] fp32 gets this head's d dt (when HAS_DDT); DQ
    (fp32, zeroed) gets dq by atomics (when ATOMIC_DQ)."""
    num_n = tl.cdiv(N, BN)
    bh = tl.program_id(0) // num_n
    pid_n = tl.program_id(0) % num_n
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    s = pid_n * BN
    nv = _valid_intervals(LENS, b, N, HAS_LENS)
    offs_n = tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_d = tl.arange(0, DP)
    offs_dv = tl.arange(0, DVP)
    cols = s + offs_n
    cmask = cols < nv

    k_ptrs = KEYS + b * stride_kb + h * stride_kh + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd
    v_ptrs = VALUES + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    kp = _load_tile(k_ptrs, cmask, offs_d, D, DP, True)
    kc = _load_tile(k_ptrs + stride_kn, cmask, offs_d, D, DP, True)
    vp = _load_tile(v_ptrs, cmask, offs_dv, DV, DVP, True)
    vc = _load_tile(v_ptrs + stride_vn, cmask, offs_dv, DV, DVP, True)
    dtv = tl.load(DT + b * stride_dtb + cols * stride_dtn, mask=cmask, other=1.0)

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    do_ptrs = DO + b * stride_dob + h * stride_doh + offs_m[:, None] * stride_don + offs_dv[None, :] * stride_dod
    dq_ptrs = DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd
    lse_ptr = LSE + bh.to(tl.int64) * M
    delta_ptr = DELTA + bh.to(tl.int64) * M

    dkp = tl.zeros([BN, DP], tl.float32)
    dkc = tl.zeros([BN, DP], tl.float32)
    dvp = tl.zeros([BN, DVP], tl.float32)
    dvc = tl.zeros([BN, DVP], tl.float32)
    ddt = tl.zeros([BN], tl.float32)
    if HAS_LENS:
        if nv == 0:
            if pid_n == 0:   # the sink alone has weight 1 for every query: d v0 = sum of dO
                dvp = _lone_sink_dv(dvp, do_ptrs, offs_m, offs_n, offs_dv, M, stride_don, BM, DV, DVP)
        else:
            dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_block(
                dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, s, cols, cmask, nv,
                q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, M, scale,
                stride_qn, stride_don, stride_dqn, CAUSAL, BM, BN, DOT_PREC, ATOMIC_DQ, HAS_DDT, D, DP, DV, DVP)
    else:
        dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_block(
            dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, s, cols, cmask, nv,
            q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, offs_d, offs_dv, M, scale,
            stride_qn, stride_don, stride_dqn, CAUSAL, BM, BN, DOT_PREC, ATOMIC_DQ, HAS_DDT, D, DP, DV, DVP)

    nmask = cols < N
    base_k = bh.to(tl.int64) * N * D
    base_v = bh.to(tl.int64) * N * DV
    k_out = cols[:, None] * D + offs_d[None, :]
    v_out = cols[:, None] * DV + offs_dv[None, :]
    _store_tile(DKL + base_k + k_out, dkp * scale, nmask, offs_d, D, DP)
    _store_tile(DKR + base_k + k_out, dkc * scale, nmask, offs_d, D, DP)
    _store_tile(DVL + base_v + v_out, dvp, nmask, offs_dv, DV, DVP)
    _store_tile(DVR + base_v + v_out, dvc, nmask, offs_dv, DV, DVP)
    if HAS_DDT:
        tl.store(DDT + bh.to(tl.int64) * N + cols, ddt / dtv, mask=nmask)


@triton.jit
def _bwd_dq_inner(
    dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv, lo, hi, NV, scale,
    stride_kn, stride_vn, stride_dtn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
):
    """Interval blocks [s, s + BN) for s in [lo, hi); tiles are [BM (queries), BN (intervals)]."""
    for s in range(lo, hi, BN):
        cols = s + offs_n
        kp, kc, vp, vc, dtv = _interval_tiles(k_ptrs, v_ptrs, dt_ptrs, s, cols, NV,
                                              stride_kn, stride_vn, stride_dtn, offs_d, offs_dv,
                                              D, DP, DV, DVP, MASK)
        s_p = _dot(q, tl.trans(kp), None, DOT_PREC)     # [BM, BN] raw q.k (scale >= 0)
        s_c = _dot(q, tl.trans(kc), None, DOT_PREC)
        e_p = tl.exp2(s_p * (scale * LOG2E) - lse2[:, None])
        e_c = tl.exp2(s_c * (scale * LOG2E) - lse2[:, None])
        cl, cr, g = _segment_weights_and_slope((s_c - s_p) * scale, e_p, e_c)
        gp_p = _dot(do, tl.trans(vp), None, DOT_PREC) - dlt[:, None]
        gp_c = _dot(do, tl.trans(vc), None, DOT_PREC) - dlt[:, None]
        cl = cl * dtv[None, :]
        cr = cr * dtv[None, :]
        g = g * dtv[None, :]
        if MASK:
            valid = (cols < NV)[None, :]
            if CAUSAL:
                valid = valid & (cols[None, :] <= rows[:, None])
            cl = tl.where(valid, cl, 0.0)
            cr = tl.where(valid, cr, 0.0)
            g = tl.where(valid, g, 0.0)
        jump = g * (gp_c - gp_p)
        da_p = gp_p * cl + jump
        da_c = gp_c * cr - jump
        dq = _dot(da_p.to(kp.dtype), kp, dq, DOT_PREC)
        dq = _dot(da_c.to(kc.dtype), kc, dq, DOT_PREC)
    return dq


@triton.jit
def _bwd_dq_kernel(
    Q, KEYS, VALUES, DT, LENS, DO, LSE, DELTA, DQ,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    M, N, H, scale,
    CAUSAL: tl.constexpr, HAS_LENS: tl.constexpr,
    D: tl.constexpr, DP: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """One program: dq of BM queries of one (batch, head), written in DQ's dtype (zero for a row
    that sees the sink alone)."""
    b, h, t0 = _query_tile(M, H, BM, CAUSAL)
    rows = t0 + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, DP)
    offs_dv = tl.arange(0, DVP)
    rmask = rows < M
    nv = _valid_intervals(LENS, b, N, HAS_LENS)

    q = _load_tile(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                   rmask, offs_d, D, DP, True)
    do = _load_tile(DO + b * stride_dob + h * stride_doh + rows[:, None] * stride_don + offs_dv[None, :] * stride_dod,
                    rmask, offs_dv, DV, DVP, True)
    lse2 = tl.load(LSE + (b * H + h) * M + rows, mask=rmask, other=0.0) * LOG2E
    dlt = tl.load(DELTA + (b * H + h) * M + rows, mask=rmask, other=0.0)
    k_ptrs = KEYS + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    v_ptrs = VALUES + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    dt_ptrs = DT + b * stride_dtb + offs_n * stride_dtn

    dq = tl.zeros([BM, DP], tl.float32)
    if CAUSAL:
        lim = tl.minimum(nv, t0 + 1)
        hi = tl.minimum(nv, t0 + BM)
    else:
        lim = nv
        hi = nv
    full_end = (lim // BN) * BN
    dq = _bwd_dq_inner(dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv,
                       0, full_end, nv, scale, stride_kn, stride_vn, stride_dtn,
                       CAUSAL, False, BN, DOT_PREC, D, DP, DV, DVP)
    dq = _bwd_dq_inner(dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, offs_d, offs_dv,
                       full_end, hi, nv, scale, stride_kn, stride_vn, stride_dtn,
                       CAUSAL, True, BN, DOT_PREC, D, DP, DV, DVP)
    _store_tile(DQ + b * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqn + offs_d[None, :] * stride_dqd,
                (dq * scale).to(DQ.dtype.element_ty), rmask, offs_d, D, DP)

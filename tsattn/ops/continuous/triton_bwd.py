"""Triton backward kernels of continuous attention (segment form; see triton_fwd.py for notation).

With P-like weights normalised by the saved LSE (cL = dt exp(a_p - LSE) phi2(d), etc.),
gp = dO . v - delta (delta = rowsum(dO * O)) and g = dt exp(a_p - LSE) phi2'(d), each interval
c contributes to the score gradients of its two knots:

    dA_p = gp_p cL + g (gp_c - gp_p)      (knot c)
    dA_c = gp_c cR - g (gp_c - gp_p)      (knot c + 1)

the segment-form version of dL/da_j = gU_j u_j + g_{j+1}(gU_{j+1} - gU_j) - g_j(gU_j - gU_{j-1}).
Then dq = scale (dA_p @ K_p + dA_c @ K_c), dK = scale dA^T q, dV = [cL | cR]^T dO and
d dt_c = sum over queries and heads of (gp_p cL + gp_c cR) / dt_c.

Kernels:
  _bwd_preprocess   delta = rowsum(dO * O)                                   grid (N/BM, B*H)
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

from .triton_fwd import LOG2E, _dot, _interval_tiles, _query_tile, _segment_weights_and_slope


@triton.jit
def _bwd_preprocess(
    O, DO, DELTA,
    stride_ob, stride_oh, stride_on, stride_od,
    stride_dob, stride_doh, stride_don, stride_dod,
    N, H,
    DV: tl.constexpr, BM: tl.constexpr,
):
    """delta[b, h, t] = sum_d dO * O (fp32), DELTA contiguous [B, H, N]."""
    num_m = tl.cdiv(N, BM)
    bh = tl.program_id(0) // num_m
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    rows = (tl.program_id(0) % num_m) * BM + tl.arange(0, BM)
    offs_dv = tl.arange(0, DV)
    rmask = rows < N
    o = tl.load(O + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + offs_dv[None, :] * stride_od,
                mask=rmask[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + b * stride_dob + h * stride_doh + rows[:, None] * stride_don + offs_dv[None, :] * stride_dod,
                 mask=rmask[:, None], other=0.0).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * N + rows, tl.sum(o * do, 1), mask=rmask)


@triton.jit
def _bwd_dkdv_inner(
    dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
    q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, lo, hi, N, scale,
    stride_qn, stride_don, stride_dqn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BM: tl.constexpr, DOT_PREC: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, HAS_DDT: tl.constexpr,
):
    """Query blocks [t0, t0 + BM) for t0 in [lo, hi); tiles are [BN (intervals), BM (queries)].

    MASK=False: every interval of the block is valid and seen by every query of the block.
    Rows t >= N load zeros (q, dO, LSE, delta), which makes every contribution of theirs zero."""
    for t0 in range(lo, hi, BM):
        rows = t0 + offs_m
        rmask = rows < N
        q = tl.load(q_ptrs + t0 * stride_qn, mask=rmask[:, None], other=0.0)
        do = tl.load(do_ptrs + t0 * stride_don, mask=rmask[:, None], other=0.0)
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
            tl.atomic_add(dq_ptrs + t0 * stride_dqn, dq * scale, mask=rmask[:, None], sem="relaxed")
    return dkp, dkc, dvp, dvc, ddt


@triton.jit
def _bwd_dkdv_kernel(
    Q, KEYS, VALUES, DT, DO, LSE, DELTA, DQ, DKL, DKR, DVL, DVR, DDT,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    N, H, scale,
    CAUSAL: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
    ATOMIC_DQ: tl.constexpr, HAS_DDT: tl.constexpr,
):
    """One program: intervals [s, s + BN) of one (batch, head).

    DKL/DVL [B,H,N,D|DV] fp32 (contiguous) get the gradient of knot c, DKR/DVR that of knot c + 1,
    both at row c; DDT [B,H,N] fp32 gets this head's d dt (when HAS_DDT); DQ (fp32, zeroed) gets
    dq by atomics (when ATOMIC_DQ)."""
    num_n = tl.cdiv(N, BN)
    bh = tl.program_id(0) // num_n
    pid_n = tl.program_id(0) % num_n
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    s = pid_n * BN
    offs_n = tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_d = tl.arange(0, D)
    offs_dv = tl.arange(0, DV)
    cols = s + offs_n
    cmask = cols < N

    k_ptrs = KEYS + b * stride_kb + h * stride_kh + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd
    v_ptrs = VALUES + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    kp = tl.load(k_ptrs, mask=cmask[:, None], other=0.0)
    kc = tl.load(k_ptrs + stride_kn, mask=cmask[:, None], other=0.0)
    vp = tl.load(v_ptrs, mask=cmask[:, None], other=0.0)
    vc = tl.load(v_ptrs + stride_vn, mask=cmask[:, None], other=0.0)
    dtv = tl.load(DT + b * stride_dtb + cols * stride_dtn, mask=cmask, other=1.0)

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    do_ptrs = DO + b * stride_dob + h * stride_doh + offs_m[:, None] * stride_don + offs_dv[None, :] * stride_dod
    dq_ptrs = DQ + b * stride_dqb + h * stride_dqh + offs_m[:, None] * stride_dqn + offs_d[None, :] * stride_dqd
    lse_ptr = LSE + bh.to(tl.int64) * N
    delta_ptr = DELTA + bh.to(tl.int64) * N

    dkp = tl.zeros([BN, D], tl.float32)
    dkc = tl.zeros([BN, D], tl.float32)
    dvp = tl.zeros([BN, DV], tl.float32)
    dvc = tl.zeros([BN, DV], tl.float32)
    ddt = tl.zeros([BN], tl.float32)
    # Query t sees interval c iff c <= t (causal): start at the block holding row s; blocks from
    # t0 >= s + BN - 1 on see all of [s, s + BN). A block with columns >= N is masked throughout.
    if CAUSAL:
        lo = (s // BM) * BM
        mid = tl.cdiv(s + BN - 1, BM) * BM
    else:
        lo = s * 0
        mid = s * 0
    mid = tl.where(s + BN > N, N, tl.minimum(mid, N))
    dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_inner(
        dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
        q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, lo, mid, N, scale,
        stride_qn, stride_don, stride_dqn, CAUSAL, True, BM, DOT_PREC, ATOMIC_DQ, HAS_DDT)
    dkp, dkc, dvp, dvc, ddt = _bwd_dkdv_inner(
        dkp, dkc, dvp, dvc, ddt, kp, kc, vp, vc, dtv, cols, cmask,
        q_ptrs, do_ptrs, lse_ptr, delta_ptr, dq_ptrs, offs_m, mid, N, N, scale,
        stride_qn, stride_don, stride_dqn, CAUSAL, False, BM, DOT_PREC, ATOMIC_DQ, HAS_DDT)

    base_k = bh.to(tl.int64) * N * D
    base_v = bh.to(tl.int64) * N * DV
    k_out = cols[:, None] * D + offs_d[None, :]
    v_out = cols[:, None] * DV + offs_dv[None, :]
    tl.store(DKL + base_k + k_out, dkp * scale, mask=cmask[:, None])
    tl.store(DKR + base_k + k_out, dkc * scale, mask=cmask[:, None])
    tl.store(DVL + base_v + v_out, dvp, mask=cmask[:, None])
    tl.store(DVR + base_v + v_out, dvc, mask=cmask[:, None])
    if HAS_DDT:
        tl.store(DDT + bh.to(tl.int64) * N + cols, ddt / dtv, mask=cmask)


@triton.jit
def _bwd_dq_inner(
    dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, lo, hi, N, scale,
    stride_kn, stride_vn, stride_dtn,
    CAUSAL: tl.constexpr, MASK: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """Interval blocks [s, s + BN) for s in [lo, hi); tiles are [BM (queries), BN (intervals)]."""
    for s in range(lo, hi, BN):
        cols = s + offs_n
        kp, kc, vp, vc, dtv = _interval_tiles(k_ptrs, v_ptrs, dt_ptrs, s, cols, N,
                                              stride_kn, stride_vn, stride_dtn, MASK)
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
            valid = (cols < N)[None, :]
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
    Q, KEYS, VALUES, DT, DO, LSE, DELTA, DQ,
    stride_qb, stride_qh, stride_qn, stride_qd,
    stride_kb, stride_kh, stride_kn, stride_kd,
    stride_vb, stride_vh, stride_vn, stride_vd,
    stride_dtb, stride_dtn,
    stride_dob, stride_doh, stride_don, stride_dod,
    stride_dqb, stride_dqh, stride_dqn, stride_dqd,
    N, H, scale,
    CAUSAL: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, DOT_PREC: tl.constexpr,
):
    """One program: dq of BM queries of one (batch, head), written in DQ's dtype."""
    b, h, t0 = _query_tile(N, H, BM, CAUSAL)
    rows = t0 + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    offs_dv = tl.arange(0, DV)
    rmask = rows < N

    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                mask=rmask[:, None], other=0.0)
    do = tl.load(DO + b * stride_dob + h * stride_doh + rows[:, None] * stride_don + offs_dv[None, :] * stride_dod,
                 mask=rmask[:, None], other=0.0)
    lse2 = tl.load(LSE + (b * H + h) * N + rows, mask=rmask, other=0.0) * LOG2E
    dlt = tl.load(DELTA + (b * H + h) * N + rows, mask=rmask, other=0.0)
    k_ptrs = KEYS + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
    v_ptrs = VALUES + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vn + offs_dv[None, :] * stride_vd
    dt_ptrs = DT + b * stride_dtb + offs_n * stride_dtn

    dq = tl.zeros([BM, D], tl.float32)
    if CAUSAL:
        lim = tl.minimum(N, t0 + 1)
        hi = tl.minimum(N, t0 + BM)
    else:
        lim = N
        hi = N
    full_end = (lim // BN) * BN
    dq = _bwd_dq_inner(dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, 0, full_end, N, scale,
                       stride_kn, stride_vn, stride_dtn, CAUSAL, False, BN, DOT_PREC)
    dq = _bwd_dq_inner(dq, q, do, lse2, dlt, k_ptrs, v_ptrs, dt_ptrs, rows, offs_n, full_end, hi, N, scale,
                       stride_kn, stride_vn, stride_dtn, CAUSAL, True, BN, DOT_PREC)
    tl.store(DQ + b * stride_dqb + h * stride_dqh + rows[:, None] * stride_dqn + offs_d[None, :] * stride_dqd,
             (dq * scale).to(DQ.dtype.element_ty), mask=rmask[:, None])

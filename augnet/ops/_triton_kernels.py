"""The Triton kernels of :func:`augnet.ops.tap_mix` (launched by :mod:`augnet.ops._triton`).

Imported only where triton is (``augnet.ops._triton`` says how to install it).

Forward. One program per (output row ``n``, block of ``BLOCK_P`` pixels). It
loops over the ``K`` taps of row ``n`` and over the channels, computes each
pixel's source coordinate from the tap's affine map, gathers the four bilinear
corners with masked loads (so ``zeros`` padding costs no branch), applies the
tap's colour map and weight, and accumulates the ``(Ch, BLOCK_P)`` output tile
in registers. ``x`` is read once per tap sample and the output is written once:
no sampling grid and no per-tap image exist in memory.

Program order. Output rows are copy-major (row ``c * ROWS + r`` is copy ``c`` of
source row ``r``); the program ids put the ``COPIES`` copies of one pixel block
of one source row next to each other, so that they run together and read that
block of ``x`` while it is in L2 (and scatter into the same lines of its
gradient), instead of once per copy a whole batch apart.

Backward. The same programs recompute the samples. The gradient of ``x`` is
scattered through the four bilinear corners with atomic adds, so on a GPU its
float summation order, hence its last bits, can change from run to run (it is
not bitwise deterministic). The per-tap reductions (``affine``, ``color``,
``weight``) are written as per-program partial sums to a buffer that torch then
sums, which is deterministic.

Bad taps (``src`` outside [0, B), a NaN or infinite warp, colour map or weight)
follow the contract of :mod:`augnet.ops.bad_input`, the same as the CUDA kernels':
the forward pass makes each row that has one NaN and ORs what was wrong into the
device's flag (no device-side assert, nothing read outside ``x``); the backward
pass sends no gradient from such a row.
"""

import triton
import triton.language as tl


@triton.jit
def _source_index(s, size, PADDING: tl.constexpr):
    """Normalised coordinate -> pixel coordinate, and its derivative (align_corners=False)."""
    i = ((s + 1.0) * size - 1.0) * 0.5
    d = s * 0.0 + 0.5 * size  # d i / d s (arithmetic, not tl.zeros_like: cheaper in the interpreter)
    if PADDING == 1:  # border: clip, zero gradient on and beyond the edges
        inside = (i > 0.0) & (i < size - 1.0)
        d = tl.where(inside, d, 0.0)
        i = tl.minimum(tl.maximum(i, 0.0), size - 1.0)
    elif PADDING == 2:  # reflection about [-0.5, size - 0.5], then clip
        i = tl.minimum(tl.maximum(i, -16777216.0), 16777216.0)  # extreme warps overflow to inf
        t = i + 0.5
        d = tl.where(t < 0.0, -d, d)
        t = tl.abs(t)
        flips = tl.floor(t / size)
        extra = t - flips * size  # fmod without frem; rounding only matters inside the clipped zone
        odd = (flips - 2.0 * tl.floor(flips * 0.5)) > 0.5
        d = tl.where(odd, -d, d)
        i = tl.where(odd, size - extra, extra) - 0.5
        inside = (i > 0.0) & (i < size - 1.0)
        d = tl.where(inside, d, 0.0)
        i = tl.minimum(tl.maximum(i, 0.0), size - 1.0)
    else:  # zeros: corners outside read 0; keep far-away points in int range
        i = tl.minimum(tl.maximum(i, -2.0), size + 1.0)
    return i, d

@triton.jit
def _program_row(pid, NPB, ROWS, COPIES):
    """``(row n, pixel block pb)`` of program ``pid``: the COPIES copies of one pixel block of one source row
    are consecutive programs, so that they run together and read that block of x while it is in L2 (rows
    are copy-major: row ``c * ROWS + r`` is copy ``c`` of source row ``r``)."""
    c = pid % COPIES
    rest = pid // COPIES
    return (c * ROWS + rest // NPB).to(tl.int64), rest % NPB


@triton.jit
def _finite(v):
    return tl.abs(v) < float("inf")  # False for NaN too

@triton.jit
def _tap_params(src_ptr, aff_ptr, w_ptr, nk, B):
    """One tap's source row, warp and weight, and the bad-input bits of what is wrong with them.

    A bad tap (``src`` outside [0, B), a NaN or infinite warp or weight) comes back harmless (row 0, the
    identity warp, weight 0) so that nothing is read outside ``x``; its row is made NaN by the caller.
    """
    s = tl.load(src_ptr + nk)
    a = aff_ptr + nk * 6
    a0 = tl.load(a + 0)
    a1 = tl.load(a + 1)
    a2 = tl.load(a + 2)
    a3 = tl.load(a + 3)
    a4 = tl.load(a + 4)
    a5 = tl.load(a + 5)
    wk = tl.load(w_ptr + nk)
    a_ok = _finite(a0) & _finite(a1) & _finite(a2) & _finite(a3) & _finite(a4) & _finite(a5)
    bits = tl.where((s >= 0) & (s < B), 0, 8) | tl.where(a_ok, 0, 1) | tl.where(_finite(wk), 0, 4)
    good = bits == 0
    s = tl.where(good, s, 0)
    a0 = tl.where(good, a0, 1.0)
    a1 = tl.where(good, a1, 0.0)
    a2 = tl.where(good, a2, 0.0)
    a3 = tl.where(good, a3, 0.0)
    a4 = tl.where(good, a4, 1.0)
    a5 = tl.where(good, a5, 0.0)
    wk = tl.where(good, wk, 0.0)
    return s, a0, a1, a2, a3, a4, a5, wk, bits

@triton.jit
def _color_bits(v):
    """The colour bit (2) where any entry of ``v`` is NaN or infinite, else 0."""
    return tl.max(tl.where(_finite(v), 0, 2), axis=0)

@triton.jit
def _tap_setup(a0, a1, a2, a3, a4, a5, gx, gy, pmask, H, W, PADDING: tl.constexpr):
    """Bilinear corner offsets / masks / weights and coordinate derivatives of one (good) tap."""
    sx = a0 * gx + a1 * gy + a2
    sy = a3 * gx + a4 * gy + a5
    ix, dix = _source_index(sx, W, PADDING)
    iy, diy = _source_index(sy, H, PADDING)
    x0f = tl.floor(ix)
    y0f = tl.floor(iy)
    wx1 = ix - x0f
    wx0 = 1.0 - wx1
    wy1 = iy - y0f
    wy0 = 1.0 - wy1
    x0 = x0f.to(tl.int32)
    y0 = y0f.to(tl.int32)
    x1 = x0 + 1
    y1 = y0 + 1
    mx0 = (x0 >= 0) & (x0 < W)
    mx1 = (x1 >= 0) & (x1 < W)
    my0 = pmask & (y0 >= 0) & (y0 < H)
    my1 = pmask & (y1 >= 0) & (y1 < H)
    o00 = y0 * W + x0
    return o00, my0 & mx0, my0 & mx1, my1 & mx0, my1 & mx1, wx0, wx1, wy0, wy1, dix, diy

@triton.jit
def _fwd_kernel(
    x_ptr,
    src_ptr,
    aff_ptr,
    col_ptr,
    w_ptr,
    out_ptr,
    flag_ptr,
    B,
    CH,
    H,
    W,
    K,
    NPB,
    ROWS,
    COPIES,
    PADDING: tl.constexpr,
    HAS_COLOR: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    n, pb = _program_row(tl.program_id(0), NPB, ROWS, COPIES)
    hw = H * W
    offs = pb * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = offs < hw
    dt = out_ptr.dtype.element_ty
    gx = (2 * (offs % W) + 1).to(dt) / W - 1.0
    gy = (2 * (offs // W) + 1).to(dt) / H - 1.0
    cidx = tl.arange(0, BLOCK_C)
    cmask = cidx < CH
    acc = tl.zeros((BLOCK_C, BLOCK_P), dtype=dt)
    row_bits = tl.full((), 0, tl.int32)  # bad-input bits of this row's taps (ops/bad_input.py)
    for k in range(K):
        nk = n * K + k
        s, a0, a1, a2, a3, a4, a5, wk, bits = _tap_params(src_ptr, aff_ptr, w_ptr, nk, B)
        row_bits = row_bits | bits
        o00, m00, m01, m10, m11, wx0, wx1, wy0, wy1, _dix, _diy = _tap_setup(
            a0, a1, a2, a3, a4, a5, gx, gy, pmask, H, W, PADDING
        )
        xb = x_ptr + s * CH * hw
        if HAS_COLOR:
            cb = col_ptr + nk * CH * (CH + 1) + cidx * (CH + 1)
            for j in range(CH):
                p = xb + j * hw + o00
                v00 = tl.load(p, mask=m00, other=0.0)
                v01 = tl.load(p + 1, mask=m01, other=0.0)
                v10 = tl.load(p + W, mask=m10, other=0.0)
                v11 = tl.load(p + W + 1, mask=m11, other=0.0)
                v = wy0 * (wx0 * v00 + wx1 * v01) + wy1 * (wx0 * v10 + wx1 * v11)
                mj = tl.load(cb + j, mask=cmask, other=0.0)
                row_bits = row_bits | _color_bits(mj)
                acc += (wk * mj)[:, None] * v[None, :]
            bias = tl.load(cb + CH, mask=cmask, other=0.0)
            row_bits = row_bits | _color_bits(bias)
            acc += (wk * bias)[:, None]
        else:
            p = xb + cidx[:, None] * hw + o00[None, :]
            cm = cmask[:, None]
            v00 = tl.load(p, mask=cm & m00[None, :], other=0.0)
            v01 = tl.load(p + 1, mask=cm & m01[None, :], other=0.0)
            v10 = tl.load(p + W, mask=cm & m10[None, :], other=0.0)
            v11 = tl.load(p + W + 1, mask=cm & m11[None, :], other=0.0)
            v = wy0[None, :] * (wx0[None, :] * v00 + wx1[None, :] * v01) + wy1[None, :] * (
                wx0[None, :] * v10 + wx1[None, :] * v11
            )
            acc += wk * v
    # A row with a bad tap is NaN, and its bits go to the device's flag (once per row).
    acc = tl.where(row_bits == 0, acc, float("nan"))
    tl.atomic_or(flag_ptr, row_bits, mask=(row_bits != 0) & (pb == 0), sem="relaxed")
    optr = out_ptr + n * CH * hw + cidx[:, None] * hw + offs[None, :]
    tl.store(optr, acc, mask=cmask[:, None] & pmask[None, :])

@triton.jit
def _bwd_kernel(
    g_ptr,
    x_ptr,
    src_ptr,
    aff_ptr,
    col_ptr,
    w_ptr,
    gx_ptr,
    gaff_ptr,
    gcol_ptr,
    gw_ptr,
    B,
    CH,
    H,
    W,
    K,
    NPB,
    ROWS,
    COPIES,
    PADDING: tl.constexpr,
    HAS_COLOR: tl.constexpr,
    NEED_X: tl.constexpr,
    BLOCK_C: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    n, pb = _program_row(tl.program_id(0), NPB, ROWS, COPIES)
    hw = H * W
    offs = pb * BLOCK_P + tl.arange(0, BLOCK_P)
    pmask = offs < hw
    dt = g_ptr.dtype.element_ty
    gx = (2 * (offs % W) + 1).to(dt) / W - 1.0
    gy = (2 * (offs // W) + 1).to(dt) / H - 1.0
    cidx = tl.arange(0, BLOCK_C)
    cmask = cidx < CH
    cm = cmask[:, None]
    # The output gradient tile of this program, read once for all taps.
    g = tl.load(g_ptr + n * CH * hw + cidx[:, None] * hw + offs[None, :], mask=cm & pmask[None, :], other=0.0)
    gsum = tl.sum(g, axis=1)
    # A row with a bad tap (ops/bad_input.py) was NaN in the forward pass and sends no gradient: its taps'
    # slots get zeros and nothing is scattered into x's gradient. Checked first, over all its taps.
    row_bits = tl.full((), 0, tl.int32)
    for k in range(K):
        nk = n * K + k
        _s, _a0, _a1, _a2, _a3, _a4, _a5, _wk, bits = _tap_params(src_ptr, aff_ptr, w_ptr, nk, B)
        row_bits = row_bits | bits
        if HAS_COLOR:
            cb = col_ptr + nk * CH * (CH + 1) + cidx * (CH + 1)
            for j in range(CH + 1):
                row_bits = row_bits | _color_bits(tl.load(cb + j, mask=cmask, other=0.0))
    k_run = tl.where(row_bits == 0, K, 0)
    for k in range(k_run, K):
        part = (n * NPB + pb) * K + k
        ga = gaff_ptr + part * 6
        for i in range(6):
            tl.store(ga + i, 0.0)
        tl.store(gw_ptr + part, 0.0)
        if HAS_COLOR:
            gcb = gcol_ptr + part * CH * (CH + 1) + cidx * (CH + 1)
            for j in range(CH + 1):
                tl.store(gcb + j, tl.zeros((BLOCK_C,), dtype=dt), mask=cmask)
    for k in range(k_run):
        nk = n * K + k
        part = (n * NPB + pb) * K + k  # this program's slot in the partial-sum buffers
        s, a0, a1, a2, a3, a4, a5, wk, _bits = _tap_params(src_ptr, aff_ptr, w_ptr, nk, B)
        o00, m00, m01, m10, m11, wx0, wx1, wy0, wy1, dix, diy = _tap_setup(
            a0, a1, a2, a3, a4, a5, gx, gy, pmask, H, W, PADDING
        )
        xb = x_ptr + s * CH * hw
        gxb = gx_ptr + s * CH * hw
        if HAS_COLOR:
            cb = col_ptr + nk * CH * (CH + 1) + cidx * (CH + 1)
            gcb = gcol_ptr + part * CH * (CH + 1) + cidx * (CH + 1)
            gix = tl.zeros((BLOCK_P,), dtype=dt)
            giy = tl.zeros((BLOCK_P,), dtype=dt)
            gwp = tl.zeros((BLOCK_P,), dtype=dt)
            for j in range(CH):
                p = xb + j * hw + o00
                v00 = tl.load(p, mask=m00, other=0.0)
                v01 = tl.load(p + 1, mask=m01, other=0.0)
                v10 = tl.load(p + W, mask=m10, other=0.0)
                v11 = tl.load(p + W + 1, mask=m11, other=0.0)
                v = wy0 * (wx0 * v00 + wx1 * v01) + wy1 * (wx0 * v10 + wx1 * v11)
                mj = tl.load(cb + j, mask=cmask, other=0.0)
                gm = tl.sum(g * mj[:, None], axis=0)  # sum_c g[c] M[c, j]
                gwp += gm * v
                tl.store(gcb + j, wk * tl.sum(g * v[None, :], axis=1), mask=cmask)
                gv = wk * gm
                gix += gv * ((v01 - v00) * wy0 + (v11 - v10) * wy1)
                giy += gv * ((v10 - v00) * wx0 + (v11 - v01) * wx1)
                if NEED_X:
                    q = gxb + j * hw + o00
                    tl.atomic_add(q, gv * wx0 * wy0, mask=m00, sem="relaxed")
                    tl.atomic_add(q + 1, gv * wx1 * wy0, mask=m01, sem="relaxed")
                    tl.atomic_add(q + W, gv * wx0 * wy1, mask=m10, sem="relaxed")
                    tl.atomic_add(q + W + 1, gv * wx1 * wy1, mask=m11, sem="relaxed")
            bias = tl.load(cb + CH, mask=cmask, other=0.0)
            tl.store(gcb + CH, wk * gsum, mask=cmask)
            gw = tl.sum(gwp, axis=0) + tl.sum(bias * gsum, axis=0)
        else:
            p = xb + cidx[:, None] * hw + o00[None, :]
            c00 = cm & m00[None, :]
            c01 = cm & m01[None, :]
            c10 = cm & m10[None, :]
            c11 = cm & m11[None, :]
            v00 = tl.load(p, mask=c00, other=0.0)
            v01 = tl.load(p + 1, mask=c01, other=0.0)
            v10 = tl.load(p + W, mask=c10, other=0.0)
            v11 = tl.load(p + W + 1, mask=c11, other=0.0)
            ax0 = wx0[None, :]
            ax1 = wx1[None, :]
            ay0 = wy0[None, :]
            ay1 = wy1[None, :]
            v = ay0 * (ax0 * v00 + ax1 * v01) + ay1 * (ax0 * v10 + ax1 * v11)
            gw = tl.sum(tl.sum(g * v, axis=1), axis=0)
            gv = wk * g
            gix = tl.sum(gv * ((v01 - v00) * ay0 + (v11 - v10) * ay1), axis=0)
            giy = tl.sum(gv * ((v10 - v00) * ax0 + (v11 - v01) * ax1), axis=0)
            if NEED_X:
                q = gxb + cidx[:, None] * hw + o00[None, :]
                tl.atomic_add(q, gv * (ax0 * ay0), mask=c00, sem="relaxed")
                tl.atomic_add(q + 1, gv * (ax1 * ay0), mask=c01, sem="relaxed")
                tl.atomic_add(q + W, gv * (ax0 * ay1), mask=c10, sem="relaxed")
                tl.atomic_add(q + W + 1, gv * (ax1 * ay1), mask=c11, sem="relaxed")
        gsx = gix * dix
        gsy = giy * diy
        ga = gaff_ptr + part * 6
        tl.store(ga + 0, tl.sum(gsx * gx, axis=0))
        tl.store(ga + 1, tl.sum(gsx * gy, axis=0))
        tl.store(ga + 2, tl.sum(gsx, axis=0))
        tl.store(ga + 3, tl.sum(gsy * gx, axis=0))
        tl.store(ga + 4, tl.sum(gsy * gy, axis=0))
        tl.store(ga + 5, tl.sum(gsy, axis=0))
        tl.store(gw_ptr + part, gw)

// CUDA kernels of augnet's fused tap_mix op (forward and backward).
//
// The op schema is declared in csrc/tap_mix.cpp (TORCH_LIBRARY(augnet, m));
// this file only registers the CUDA implementations. Semantics are those of
// augnet.ops.tap_mix_reference: per tap, F.affine_grid + F.grid_sample
// (bilinear, align_corners=False, padding zeros | border | reflection), an
// affine colour map [M | b] (identity when color is None) and a weight.
//
// Forward: one thread per output pixel (n, y, x); it loops over the K taps and
// the channels, accumulates in registers and writes each output value once.
//
// Backward: one block per (tap (n, k), chunk of pixels). grad_x is scattered
// with atomicAdd, so the CUDA backward is NOT bitwise deterministic (the
// order of the additions into grad_x varies from run to run). The per-tap
// reductions (grad_affine, grad_weight, grad_color) are summed per block with
// a fixed-order block reduction into a partial-sum buffer, then a second
// kernel adds the chunks of each tap in order: those three gradients are
// deterministic on a given GPU.
//
// Bad inputs (augnet/ops/bad_input.py): a tap whose src is outside [0, B) or
// whose warp, colour map or weight is NaN or infinite is never sampled (nothing
// is read outside x, and there is no device-side assert, which would poison the
// CUDA context); the forward kernel writes NaN to every pixel of its row and
// ORs what was wrong into the device's flag (registered from Python through
// augnet::_set_bad_input_flag); the backward kernels send no gradient from such
// a row. The Triton kernels do the same.
//
// Output coordinates are computed as (2x + 1) / W - 1, not with
// F.affine_grid's linspace, so they can differ from it in the last bit. Where
// a sample falls exactly on a pixel (identity or flip taps) bilinear
// interpolation has a kink: the gradient to the affine there is one-sided, and
// which side is taken depends on that rounding, here as in the reference.

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/macros/Macros.h>
#include <torch/library.h>
#include <array>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <tuple>

namespace augnet_tap_mix_cuda {
namespace {

constexpr int kThreads = 256;  // every kernel below is launched with this block size
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 4;                                // channels held in registers at a time
constexpr int kTileSums = kTile * kTile + kTile;        // one tile of the colour sums: g_c * v_j, and g_c
constexpr int kFixedSums = 7;                           // 6 affine + 1 weight, before the colour sums
constexpr int kMainSums = kFixedSums + kTileSums;       // main pass: fixed sums + a fused colour tile

enum Padding : int { kZeros = 0, kBorder = 1, kReflection = 2 };

// Bits of the bad-input flag (augnet/ops/bad_input.py BITS).
enum BadInput : int { kBadAffine = 1, kBadColor = 2, kBadWeight = 4, kBadSrc = 8 };

// Per device index: the address of its bad-input flag, or nullptr (then nothing is recorded).
constexpr int kMaxDevices = 64;
std::array<int*, kMaxDevices> g_bad_input_flag{};

template <typename T>
__device__ __forceinline__ bool finite(T v) {
  return ::isfinite(v);
}

// What is wrong with tap nk's source, warp and weight (0: nothing).
template <typename T>
__device__ __forceinline__ int tap_bits(int64_t s, int64_t B, const T* a, T wk) {
  const bool a_ok = finite(a[0]) && finite(a[1]) && finite(a[2]) && finite(a[3]) && finite(a[4]) && finite(a[5]);
  return (s >= 0 && s < B ? 0 : kBadSrc) | (a_ok ? 0 : kBadAffine) | (finite(wk) ? 0 : kBadWeight);
}

// ---------------------------------------------------------------------------
// Sampling (grid_sample, bilinear, align_corners=False)
// ---------------------------------------------------------------------------

// Clip to [0, size - 1]; as grid_sample, the borders count as clipped (zero gradient).
template <typename T>
__device__ __forceinline__ T clip_coordinate(T in, int size, T& grad) {
  if (in <= T(0)) {
    grad = T(0);
    return T(0);
  }
  const T hi = static_cast<T>(size - 1);
  if (in >= hi) {
    grad = T(0);
    return hi;
  }
  grad = T(1);
  return in;
}

// Reflect about [twice_low / 2, twice_high / 2]; grad is +-1 (the sign flips with each reflection).
template <typename T>
__device__ __forceinline__ T reflect_coordinate(T in, int twice_low, int twice_high, T& grad) {
  if (twice_low == twice_high) {
    grad = T(0);
    return T(0);
  }
  const T lo = static_cast<T>(twice_low) / T(2);
  const T span = static_cast<T>(twice_high - twice_low) / T(2);
  in -= lo;
  T sign = T(1);
  if (in < T(0)) {
    sign = T(-1);
    in = -in;
  }
  const T extra = ::fmod(in, span);
  const T flips = ::floor(in / span);
  if (::fmod(flips, T(2)) == T(0)) {
    grad = sign;
    return extra + lo;
  }
  grad = -sign;
  return span - extra + lo;
}

// Normalised coordinate s in [-1, 1] -> pixel coordinate, with d(pixel) / d(s) in grad.
template <typename T>
__device__ __forceinline__ T source_index(T s, int size, int padding, T& grad) {
  T coord = ((s + T(1)) * static_cast<T>(size) - T(1)) / T(2);
  grad = static_cast<T>(size) / T(2);
  if (padding == kBorder) {
    T g_clip;
    coord = clip_coordinate(coord, size, g_clip);
    grad *= g_clip;
  } else if (padding == kReflection) {
    T g_refl, g_clip;
    // Bound the index before reflecting (an extreme finite warp overflows to +-inf; fmod(inf) is NaN).
    coord = fmax(fmin(coord, T(16777216)), T(-16777216));
    coord = reflect_coordinate(coord, -1, 2 * size - 1, g_refl);
    coord = clip_coordinate(coord, size, g_clip);
    grad *= g_refl * g_clip;
  }
  // Far-away or non-finite coordinates: move them to where every corner is
  // outside the image (as grid_sample's safe_downgrade_to_int_range), so the
  // conversion to int below is defined.
  if (!(coord > T(-1e9) && coord < T(1e9))) {
    coord = T(-100);
  }
  return coord;
}

// The four bilinear corners of one sample: (y0, x0), (y0, x1), (y1, x0), (y1, x1).
template <typename T>
struct Corners {
  int64_t off[4];  // offsets in an (H, W) plane; 0 for corners outside the image
  bool in[4];      // corner inside the image
  T wx0, wx1, wy0, wy1;
  T dix, diy;  // d ix / d sx and d iy / d sy (scale, clip and reflection factors)
};

template <typename T>
__device__ __forceinline__ Corners<T> locate(T sx, T sy, int H, int W, int padding) {
  Corners<T> c;
  const T ix = source_index(sx, W, padding, c.dix);
  const T iy = source_index(sy, H, padding, c.diy);
  const T fx = ::floor(ix);
  const T fy = ::floor(iy);
  const int x0 = static_cast<int>(fx);
  const int y0 = static_cast<int>(fy);
  c.wx1 = ix - fx;
  c.wx0 = (fx + T(1)) - ix;
  c.wy1 = iy - fy;
  c.wy0 = (fy + T(1)) - iy;
  const bool in_x0 = x0 >= 0 && x0 < W;
  const bool in_x1 = x0 + 1 >= 0 && x0 + 1 < W;
  const bool in_y0 = y0 >= 0 && y0 < H;
  const bool in_y1 = y0 + 1 >= 0 && y0 + 1 < H;
  c.in[0] = in_y0 && in_x0;
  c.in[1] = in_y0 && in_x1;
  c.in[2] = in_y1 && in_x0;
  c.in[3] = in_y1 && in_x1;
  const int64_t base = static_cast<int64_t>(y0) * W + x0;
  c.off[0] = c.in[0] ? base : 0;
  c.off[1] = c.in[1] ? base + 1 : 0;
  c.off[2] = c.in[2] ? base + W : 0;
  c.off[3] = c.in[3] ? base + W + 1 : 0;
  return c;
}

// Corner values of one plane, 0 for corners outside the image.
template <typename T>
__device__ __forceinline__ void corner_values(const T* __restrict__ plane, const Corners<T>& c, T (&v)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = c.in[i] ? plane[c.off[i]] : T(0);
  }
}

template <typename T>
__device__ __forceinline__ void corner_weights(const Corners<T>& c, T (&w)[4]) {
  w[0] = c.wx0 * c.wy0;
  w[1] = c.wx1 * c.wy0;
  w[2] = c.wx0 * c.wy1;
  w[3] = c.wx1 * c.wy1;
}

template <typename T>
__device__ __forceinline__ T bilinear(const Corners<T>& c, const T (&v)[4]) {
  T w[4];
  corner_weights(c, w);
  return v[0] * w[0] + v[1] * w[1] + v[2] * w[2] + v[3] * w[3];
}

template <typename T>
__device__ __forceinline__ T sample(const T* __restrict__ plane, const Corners<T>& c) {
  T v[4];
  corner_values(plane, c, v);
  return bilinear(c, v);
}

// Normalised output coordinate of pixel i of n (F.affine_grid, align_corners=False).
template <typename T>
__device__ __forceinline__ T base_coordinate(int i, int n) {
  return static_cast<T>(2 * i + 1) / static_cast<T>(n) - T(1);
}

// ---------------------------------------------------------------------------
// Block reduction
// ---------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sums vals over the block (blockDim.x == kThreads) in a fixed order; thread 0
// ends up with the totals. Every thread of the block must call it.
// smem holds at least kWarps * NV values.
template <typename T, int NV>
__device__ __forceinline__ void block_sum(T (&vals)[NV], T* smem) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < NV; ++i) {
    const T v = warp_sum(vals[i]);
    if (lane == 0) {
      smem[warp * NV + i] = v;
    }
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int i = 0; i < NV; ++i) {
      vals[i] = warp_sum(lane < kWarps ? smem[lane * NV + i] : T(0));
    }
  }
  __syncthreads();  // smem may be reused right after
}

// ---------------------------------------------------------------------------
// Forward
// ---------------------------------------------------------------------------

// One thread per output pixel (n, y, x). Channels are produced kTile at a
// time; with Ch <= kTile (the usual case) every sample is read exactly once.
template <typename T>
__global__ void __launch_bounds__(kThreads) tap_mix_forward_kernel(
    const T* __restrict__ x,
    const int64_t* __restrict__ src,
    const T* __restrict__ affine,
    const T* __restrict__ color,  // nullptr: identity colour map
    const T* __restrict__ weight,
    T* __restrict__ out,
    int* __restrict__ bad_flag,  // nullptr: do not record bad inputs
    int64_t B,
    int64_t N,
    int64_t K,
    int C,
    int H,
    int W,
    int padding) {
  const int64_t HW = static_cast<int64_t>(H) * W;
  const int64_t total = N * HW;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t n = idx / HW;
    const int64_t p = idx - n * HW;
    const int py = static_cast<int>(p / W);
    const int px = static_cast<int>(p - static_cast<int64_t>(py) * W);
    const T gx = base_coordinate<T>(px, W);
    const T gy = base_coordinate<T>(py, H);
    T* out_p = out + n * C * HW + p;
    int bits = 0;  // what is wrong with this row's taps: every thread of the row finds the same

    for (int c0 = 0; c0 < C; c0 += kTile) {
      T acc[kTile];
#pragma unroll
      for (int t = 0; t < kTile; ++t) {
        acc[t] = T(0);
      }
      for (int64_t k = 0; k < K; ++k) {
        const int64_t nk = n * K + k;
        const int64_t s = src[nk];
        const T* a = affine + nk * 6;
        const T wk = weight[nk];
        int tap = tap_bits(s, B, a, wk);
        if (color != nullptr) {  // the colour entries this tile reads, checked even for an otherwise bad tap
          const T* m = color + nk * C * (C + 1);
          for (int t = 0; t < kTile && c0 + t < C; ++t) {
            for (int j = 0; j <= C; ++j) {
              tap |= finite(m[(c0 + t) * (C + 1) + j]) ? 0 : kBadColor;
            }
          }
        }
        bits |= tap;
        if (tap != 0) {
          continue;  // never sampled; the row is NaN below
        }
        const T sx = a[0] * gx + a[1] * gy + a[2];
        const T sy = a[3] * gx + a[4] * gy + a[5];
        const Corners<T> cr = locate(sx, sy, H, W, padding);
        const T* xs = x + s * C * HW;
        if (color == nullptr) {
#pragma unroll
          for (int t = 0; t < kTile; ++t) {
            if (c0 + t < C) {
              acc[t] += wk * sample(xs + (c0 + t) * HW, cr);
            }
          }
        } else {
          const T* m = color + nk * C * (C + 1);  // row c: M[c][0..C-1], b[c]
          T mixed[kTile];
#pragma unroll
          for (int t = 0; t < kTile; ++t) {
            mixed[t] = c0 + t < C ? m[(c0 + t) * (C + 1) + C] : T(0);
          }
          for (int j = 0; j < C; ++j) {
            const T v = sample(xs + j * HW, cr);
#pragma unroll
            for (int t = 0; t < kTile; ++t) {
              if (c0 + t < C) {
                mixed[t] += m[(c0 + t) * (C + 1) + j] * v;
              }
            }
          }
#pragma unroll
          for (int t = 0; t < kTile; ++t) {
            acc[t] += wk * mixed[t];
          }
        }
      }
#pragma unroll
      for (int t = 0; t < kTile; ++t) {
        if (c0 + t < C) {
          out_p[(c0 + t) * HW] = acc[t];
        }
      }
    }
    if (bits != 0) {  // a bad tap: the whole row is NaN (over the tiles already written), and it is recorded
      for (int c = 0; c < C; ++c) {
        out_p[c * HW] = static_cast<T>(NAN);
      }
      if (p == 0 && bad_flag != nullptr) {
        atomicOr(bad_flag, bits);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Backward
// ---------------------------------------------------------------------------

// Partial sums of tap nk, chunk `chunk`: R = 7 + (color ? C * (C + 1) : 0) entries:
//   [0..5]  grad_affine (row-major 2x3)
//   [6]     grad_weight
//   [7 + c * (C + 1) + j]  sum over pixels of g_c * v_j (j < C) or of g_c (j == C);
//           grad_color is weight times these.
//
// Grid: (N * K, chunks); each block covers pixels [chunk * chunk_len, ...).
template <typename T>
__global__ void __launch_bounds__(kThreads) tap_mix_backward_kernel(
    const T* __restrict__ grad_out,
    const T* __restrict__ x,
    const int64_t* __restrict__ src,
    const T* __restrict__ affine,
    const T* __restrict__ color,  // nullptr: identity colour map
    const T* __restrict__ weight,
    T* __restrict__ grad_x,  // nullptr: skip the scatter into x's gradient
    T* __restrict__ partial,
    int64_t B,
    int64_t K,
    int C,
    int H,
    int W,
    int padding,
    int64_t chunk_len,
    int R) {
  __shared__ T smem[kWarps * kMainSums];

  const int64_t nk = blockIdx.x;
  const int64_t n = nk / K;
  const int64_t HW = static_cast<int64_t>(H) * W;
  const int64_t p_begin = static_cast<int64_t>(blockIdx.y) * chunk_len;
  const int64_t p_end = p_begin + chunk_len < HW ? p_begin + chunk_len : HW;
  T* part = partial + (nk * gridDim.y + blockIdx.y) * R;

  // A row with a bad tap sends no gradient (augnet/ops/bad_input.py): the block checks all K taps of its
  // row together, and every thread leaves at once (before any barrier) with zeros in the partial sums.
  {
    const int64_t per_tap = 8 + (color == nullptr ? 0 : static_cast<int64_t>(C) * (C + 1));
    bool bad = false;
    for (int64_t i = threadIdx.x; i < K * per_tap; i += blockDim.x) {
      const int64_t t = n * K + i / per_tap;
      const int64_t e = i % per_tap;
      if (e == 0) {
        bad |= src[t] < 0 || src[t] >= B;
      } else if (e < 7) {
        bad |= !finite(affine[t * 6 + e - 1]);
      } else if (e == 7) {
        bad |= !finite(weight[t]);
      } else {
        bad |= !finite(color[t * C * (C + 1) + e - 8]);
      }
    }
    if (__syncthreads_or(bad)) {
      for (int i = threadIdx.x; i < R; i += blockDim.x) {
        part[i] = T(0);
      }
      return;
    }
  }
  const int64_t s = src[nk];
  const bool s_ok = s >= 0 && s < B;  // always true here; kept so that no index can leave x

  T a[6];
#pragma unroll
  for (int i = 0; i < 6; ++i) {
    a[i] = affine[nk * 6 + i];
  }
  const T wk = weight[nk];
  const T* m = color == nullptr ? nullptr : color + nk * C * (C + 1);
  const bool fused_color = m != nullptr && C <= kTile;  // colour sums done in the main pass
  const T* g_n = grad_out + n * C * HW;
  const T* xs = s_ok ? x + s * C * HW : x;
  T* gxs = (s_ok && grad_x != nullptr) ? grad_x + s * C * HW : nullptr;

  // Main pass: grad_x, grad_affine, grad_weight (and the colour sums when C <= kTile).
  T sums[kMainSums];
#pragma unroll
  for (int i = 0; i < kMainSums; ++i) {
    sums[i] = T(0);
  }
  for (int64_t p = p_begin + threadIdx.x; s_ok && p < p_end; p += blockDim.x) {
    const int py = static_cast<int>(p / W);
    const int px = static_cast<int>(p - static_cast<int64_t>(py) * W);
    const T gx = base_coordinate<T>(px, W);
    const T gy = base_coordinate<T>(py, H);
    const T sx = a[0] * gx + a[1] * gy + a[2];
    const T sy = a[3] * gx + a[4] * gy + a[5];
    const Corners<T> cr = locate(sx, sy, H, W, padding);
    T cw[4];
    corner_weights(cr, cw);
    const T* g = g_n + p;  // g[c * HW] = grad_out[n, c, y, x]

    T gix = T(0);
    T giy = T(0);
    T gw = T(0);  // d out / d weight, dotted with g
    if (m != nullptr) {
      for (int c = 0; c < C; ++c) {
        gw += g[c * HW] * m[c * (C + 1) + C];
      }
    }
    T v_tile[kTile];  // samples of channels 0..kTile-1, for the fused colour sums
#pragma unroll
    for (int jj = 0; jj < kTile; ++jj) {
      v_tile[jj] = T(0);
    }
    for (int j0 = 0; j0 < C; j0 += kTile) {
#pragma unroll
      for (int jj = 0; jj < kTile; ++jj) {
        const int j = j0 + jj;
        if (j < C) {
          // d loss / d v_j, divided by the weight: sum_c g_c M[c][j]
          T gv_raw;
          if (m != nullptr) {
            gv_raw = T(0);
            for (int c = 0; c < C; ++c) {
              gv_raw += g[c * HW] * m[c * (C + 1) + j];
            }
          } else {
            gv_raw = g[j * HW];
          }
          T v4[4];
          corner_values(xs + j * HW, cr, v4);
          const T v = v4[0] * cw[0] + v4[1] * cw[1] + v4[2] * cw[2] + v4[3] * cw[3];
          if (j0 == 0) {
            v_tile[jj] = v;
          }
          gw += gv_raw * v;
          const T gv = wk * gv_raw;
          if (gxs != nullptr) {
            T* gplane = gxs + j * HW;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              if (cr.in[i]) {
                atomicAdd(gplane + cr.off[i], gv * cw[i]);
              }
            }
          }
          gix += gv * (cr.wy0 * (v4[1] - v4[0]) + cr.wy1 * (v4[3] - v4[2]));
          giy += gv * (cr.wx0 * (v4[2] - v4[0]) + cr.wx1 * (v4[3] - v4[1]));
        }
      }
    }
    const T gsx = gix * cr.dix;
    const T gsy = giy * cr.diy;
    sums[0] += gsx * gx;
    sums[1] += gsx * gy;
    sums[2] += gsx;
    sums[3] += gsy * gx;
    sums[4] += gsy * gy;
    sums[5] += gsy;
    sums[6] += gw;
    if (fused_color) {
#pragma unroll
      for (int cc = 0; cc < kTile; ++cc) {
        if (cc < C) {
          const T gc = g[cc * HW];
#pragma unroll
          for (int jj = 0; jj < kTile; ++jj) {
            if (jj < C) {
              sums[kFixedSums + cc * kTile + jj] += gc * v_tile[jj];
            }
          }
          sums[kFixedSums + kTile * kTile + cc] += gc;
        }
      }
    }
  }
  block_sum(sums, smem);
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < kFixedSums; ++i) {
      part[i] = sums[i];
    }
    if (fused_color) {
#pragma unroll
      for (int cc = 0; cc < kTile; ++cc) {
        if (cc < C) {
#pragma unroll
          for (int jj = 0; jj < kTile; ++jj) {
            if (jj < C) {
              part[kFixedSums + cc * (C + 1) + jj] = sums[kFixedSums + cc * kTile + jj];
            }
          }
          part[kFixedSums + cc * (C + 1) + C] = sums[kFixedSums + kTile * kTile + cc];
        }
      }
    }
  }

  // Colour sums for C > kTile: one more pass over the pixels per kTile x kTile
  // tile of (c, j), re-sampling the channels of the tile.
  if (m == nullptr || fused_color) {
    return;  // uniform over the block: no thread is left waiting at a barrier
  }
  for (int c0 = 0; c0 < C; c0 += kTile) {
    for (int j0 = 0; j0 < C; j0 += kTile) {
      T tile[kTileSums];
#pragma unroll
      for (int i = 0; i < kTileSums; ++i) {
        tile[i] = T(0);
      }
      for (int64_t p = p_begin + threadIdx.x; s_ok && p < p_end; p += blockDim.x) {
        const int py = static_cast<int>(p / W);
        const int px = static_cast<int>(p - static_cast<int64_t>(py) * W);
        const T gx = base_coordinate<T>(px, W);
        const T gy = base_coordinate<T>(py, H);
        const T sx = a[0] * gx + a[1] * gy + a[2];
        const T sy = a[3] * gx + a[4] * gy + a[5];
        const Corners<T> cr = locate(sx, sy, H, W, padding);
        const T* g = g_n + p;
        T v[kTile];
#pragma unroll
        for (int jj = 0; jj < kTile; ++jj) {
          v[jj] = j0 + jj < C ? sample(xs + (j0 + jj) * HW, cr) : T(0);
        }
#pragma unroll
        for (int cc = 0; cc < kTile; ++cc) {
          if (c0 + cc < C) {
            const T gc = g[(c0 + cc) * HW];
#pragma unroll
            for (int jj = 0; jj < kTile; ++jj) {
              tile[cc * kTile + jj] += gc * v[jj];
            }
            tile[kTile * kTile + cc] += gc;
          }
        }
      }
      block_sum(tile, smem);
      if (threadIdx.x == 0) {
#pragma unroll
        for (int cc = 0; cc < kTile; ++cc) {
          const int c = c0 + cc;
          if (c < C) {
#pragma unroll
            for (int jj = 0; jj < kTile; ++jj) {
              if (j0 + jj < C) {
                part[kFixedSums + c * (C + 1) + j0 + jj] = tile[cc * kTile + jj];
              }
            }
            if (j0 == 0) {
              part[kFixedSums + c * (C + 1) + C] = tile[kTile * kTile + cc];
            }
          }
        }
      }
    }
  }
}

// Second pass: add the chunks of each tap (in order) and scatter the totals
// into grad_affine, grad_weight and grad_color. One thread per (tap, entry).
template <typename T>
__global__ void __launch_bounds__(kThreads) tap_mix_backward_finish_kernel(
    const T* __restrict__ partial,
    const T* __restrict__ weight,
    T* __restrict__ grad_affine,
    T* __restrict__ grad_weight,
    T* __restrict__ grad_color,  // nullptr without color
    int64_t NK,
    int64_t chunks,
    int R,
    int C) {
  const int64_t total = NK * R;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += stride) {
    const int64_t nk = idx / R;
    const int r = static_cast<int>(idx - nk * R);
    T sum = T(0);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      sum += partial[(nk * chunks + ch) * R + r];
    }
    if (r < 6) {
      grad_affine[nk * 6 + r] = sum;
    } else if (r == 6) {
      grad_weight[nk] = sum;
    } else {
      // A non-finite weight belongs to a bad row, whose sums are all 0: its colour gradient is 0 too.
      const T wk = weight[nk];
      grad_color[nk * C * (C + 1) + (r - kFixedSums)] = finite(wk) ? wk * sum : T(0);
    }
  }
}

// ---------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

unsigned int grid_size(int64_t work) {
  return static_cast<unsigned int>(std::min<int64_t>(std::max<int64_t>(ceil_div(work, kThreads), 1), 1 << 30));
}

int* bad_input_flag(const at::Tensor& x) {
  const int index = x.device().index();
  return index >= 0 && index < kMaxDevices ? g_bad_input_flag[index] : nullptr;
}

void set_bad_input_flag(const at::Tensor& flag) {
  TORCH_CHECK(
      flag.is_cuda() && flag.scalar_type() == at::kInt && flag.numel() >= 1 && flag.is_contiguous(),
      "_set_bad_input_flag: flag must be a contiguous int32 CUDA tensor, got ", flag.scalar_type(), " on ",
      flag.device());
  const int index = flag.device().index();
  TORCH_CHECK(index >= 0 && index < kMaxDevices, "_set_bad_input_flag: device index ", index, " out of range");
  g_bad_input_flag[index] = flag.data_ptr<int>();
}

int parse_padding(const char* op, c10::string_view padding) {
  if (padding == "zeros") {
    return kZeros;
  }
  if (padding == "border") {
    return kBorder;
  }
  if (padding == "reflection") {
    return kReflection;
  }
  TORCH_CHECK(false, op, ": padding must be one of 'zeros', 'border', 'reflection', got '", std::string(padding), "'");
  return kZeros;
}

void check_tensor(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.defined(), op, ": ", name, " must be a defined tensor");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.device() == x.device(), op, ": ", name, " is on ", t.device(), " but x is on ", x.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous");
}

void check_floating(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(
      t.scalar_type() == x.scalar_type(),
      op, ": ", name, " must have the dtype of x (", x.scalar_type(), "), got ", t.scalar_type());
}

// Validates the op's inputs; returns the colour tensor when there is one.
std::optional<at::Tensor> check_inputs(
    const char* op,
    const at::Tensor& x,
    const at::Tensor& src,
    const at::Tensor& affine,
    const std::optional<at::Tensor>& color,
    const at::Tensor& weight) {
  TORCH_CHECK(x.defined(), op, ": x must be a defined tensor");
  TORCH_CHECK(x.is_cuda(), op, ": x must be a CUDA tensor, got one on ", x.device());
  TORCH_CHECK(x.dim() == 4, op, ": x must be a (B, Ch, H, W) tensor, got shape ", x.sizes());
  TORCH_CHECK(
      x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
      op, ": x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(x.is_contiguous(), op, ": x must be contiguous");
  TORCH_CHECK(
      x.size(1) < INT_MAX && x.size(2) < INT_MAX && x.size(3) < INT_MAX,
      op, ": x has a dimension too large for the kernel, got shape ", x.sizes());

  check_tensor(op, "src", src, x);
  TORCH_CHECK(src.scalar_type() == at::kLong, op, ": src must be int64, got ", src.scalar_type());
  TORCH_CHECK(src.dim() == 2, op, ": src must be an (N, K) tensor, got shape ", src.sizes());
  const int64_t N = src.size(0);
  const int64_t K = src.size(1);
  TORCH_CHECK(N * K < INT_MAX, op, ": too many taps (N * K = ", N * K, ") for the kernel");
  TORCH_CHECK(x.size(0) > 0 || N == 0, op, ": x is an empty batch but src asks for source rows");
  const int64_t C = x.size(1);

  check_tensor(op, "affine", affine, x);
  check_floating(op, "affine", affine, x);
  TORCH_CHECK(
      affine.dim() == 4 && affine.size(0) == N && affine.size(1) == K && affine.size(2) == 2 && affine.size(3) == 3,
      op, ": affine must have shape (", N, ", ", K, ", 2, 3), got ", affine.sizes());

  check_tensor(op, "weight", weight, x);
  check_floating(op, "weight", weight, x);
  TORCH_CHECK(
      weight.dim() == 2 && weight.size(0) == N && weight.size(1) == K,
      op, ": weight must have shape (", N, ", ", K, "), got ", weight.sizes());

  if (!color.has_value() || !color->defined()) {
    return std::nullopt;
  }
  const at::Tensor& col = *color;
  check_tensor(op, "color", col, x);
  check_floating(op, "color", col, x);
  TORCH_CHECK(
      col.dim() == 4 && col.size(0) == N && col.size(1) == K && col.size(2) == C && col.size(3) == C + 1,
      op, ": color must be None or of shape (", N, ", ", K, ", ", C, ", ", C + 1, "), got ", col.sizes());
  return col;
}

at::Tensor tap_mix_cuda(
    const at::Tensor& x,
    const at::Tensor& src,
    const at::Tensor& affine,
    const std::optional<at::Tensor>& color,
    const at::Tensor& weight,
    c10::string_view padding) {
  const char* op = "tap_mix";
  const std::optional<at::Tensor> col = check_inputs(op, x, src, affine, color, weight);
  const int pad = parse_padding(op, padding);
  const c10::cuda::CUDAGuard device_guard(x.device());

  const int64_t B = x.size(0);
  const int C = static_cast<int>(x.size(1));
  const int H = static_cast<int>(x.size(2));
  const int W = static_cast<int>(x.size(3));
  const int64_t N = src.size(0);
  const int64_t K = src.size(1);
  at::Tensor out = at::empty({N, C, H, W}, x.options());
  if (out.numel() == 0) {
    return out;
  }
  const int64_t pixels = N * H * W;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "tap_mix_cuda", [&] {
    tap_mix_forward_kernel<scalar_t><<<grid_size(pixels), kThreads, 0, stream>>>(
        x.data_ptr<scalar_t>(),
        src.data_ptr<int64_t>(),
        affine.data_ptr<scalar_t>(),
        col.has_value() ? col->data_ptr<scalar_t>() : nullptr,
        weight.data_ptr<scalar_t>(),
        out.data_ptr<scalar_t>(),
        bad_input_flag(x),
        B,
        N,
        K,
        C,
        H,
        W,
        pad);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tap_mix_backward_cuda(
    const at::Tensor& grad_out_in,
    const at::Tensor& x,
    const at::Tensor& src,
    const at::Tensor& affine,
    const std::optional<at::Tensor>& color,
    const at::Tensor& weight,
    c10::string_view padding,
    std::array<bool, 4> output_mask) {
  const char* op = "tap_mix_backward";
  const std::optional<at::Tensor> col = check_inputs(op, x, src, affine, color, weight);
  const int pad = parse_padding(op, padding);
  const int64_t B = x.size(0);
  const int C = static_cast<int>(x.size(1));
  const int H = static_cast<int>(x.size(2));
  const int W = static_cast<int>(x.size(3));
  const int64_t N = src.size(0);
  const int64_t K = src.size(1);

  TORCH_CHECK(grad_out_in.defined(), op, ": grad_out must be a defined tensor");
  TORCH_CHECK(grad_out_in.is_cuda(), op, ": grad_out must be a CUDA tensor, got one on ", grad_out_in.device());
  TORCH_CHECK(
      grad_out_in.device() == x.device(),
      op, ": grad_out is on ", grad_out_in.device(), " but x is on ", x.device());
  check_floating(op, "grad_out", grad_out_in, x);
  TORCH_CHECK(
      grad_out_in.dim() == 4 && grad_out_in.size(0) == N && grad_out_in.size(1) == C && grad_out_in.size(2) == H &&
          grad_out_in.size(3) == W,
      op, ": grad_out must have shape (", N, ", ", C, ", ", H, ", ", W, "), got ", grad_out_in.sizes());
  // Autograd may hand over an expanded (stride-0) gradient: make it dense here
  // rather than rejecting it (a no-op when it already is contiguous).
  const at::Tensor grad_out = grad_out_in.contiguous();

  const c10::cuda::CUDAGuard device_guard(x.device());
  at::Tensor grad_x = at::zeros_like(x);
  const int64_t NK = N * K;
  const int64_t HW = static_cast<int64_t>(H) * W;
  const bool has_color = col.has_value();
  if (NK == 0 || HW == 0) {  // nothing to sample: every gradient is zero
    return {
        grad_x,
        at::zeros({N, K, 2, 3}, x.options()),
        has_color ? at::zeros({N, K, C, C + 1}, x.options()) : at::empty({0}, x.options()),
        at::zeros({N, K}, x.options())};
  }
  at::Tensor grad_color = has_color ? at::empty({N, K, C, C + 1}, x.options()) : at::empty({0}, x.options());
  at::Tensor grad_affine = at::empty({N, K, 2, 3}, x.options());
  at::Tensor grad_weight = at::empty({N, K}, x.options());

  // Pixel chunks per tap: enough blocks to fill the GPU, at least ~4 pixels
  // per thread, and within the grid's y limit.
  int sm_count = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, x.device().index()));
  const int64_t sms = std::max(sm_count, 1);
  int64_t chunks = ceil_div(4 * sms, NK);
  chunks = std::min<int64_t>({chunks, ceil_div(HW, 4 * kThreads), 65535});
  chunks = std::max<int64_t>(chunks, 1);
  const int64_t chunk_len = ceil_div(HW, chunks);
  chunks = ceil_div(HW, chunk_len);
  const int R = kFixedSums + (has_color ? C * (C + 1) : 0);
  at::Tensor partial = at::empty({NK, chunks, R}, x.options());

  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "tap_mix_backward_cuda", [&] {
    const scalar_t* col_ptr = has_color ? col->data_ptr<scalar_t>() : nullptr;
    const dim3 grid(static_cast<unsigned int>(NK), static_cast<unsigned int>(chunks));
    tap_mix_backward_kernel<scalar_t><<<grid, kThreads, 0, stream>>>(
        grad_out.data_ptr<scalar_t>(),
        x.data_ptr<scalar_t>(),
        src.data_ptr<int64_t>(),
        affine.data_ptr<scalar_t>(),
        col_ptr,
        weight.data_ptr<scalar_t>(),
        output_mask[0] ? grad_x.data_ptr<scalar_t>() : nullptr,  // nullptr: x needs no gradient
        partial.data_ptr<scalar_t>(),
        B,
        K,
        C,
        H,
        W,
        pad,
        chunk_len,
        R);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    tap_mix_backward_finish_kernel<scalar_t><<<grid_size(NK * R), kThreads, 0, stream>>>(
        partial.data_ptr<scalar_t>(),
        weight.data_ptr<scalar_t>(),
        grad_affine.data_ptr<scalar_t>(),
        grad_weight.data_ptr<scalar_t>(),
        has_color ? grad_color.data_ptr<scalar_t>() : nullptr,
        NK,
        chunks,
        R,
        C);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {grad_x, grad_affine, grad_color, grad_weight};
}

}  // namespace
}  // namespace augnet_tap_mix_cuda

TORCH_LIBRARY_IMPL(augnet, CUDA, m) {
  m.impl("tap_mix", &augnet_tap_mix_cuda::tap_mix_cuda);
  m.impl("tap_mix_backward", &augnet_tap_mix_cuda::tap_mix_backward_cuda);
  m.impl("_set_bad_input_flag", &augnet_tap_mix_cuda::set_bad_input_flag);
}

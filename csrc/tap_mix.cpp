// augnet::tap_mix on CPU: a weighted sum of warped, colour-mapped taps of
// source images, for all output rows in one pass (see augnet/ops/tap_mix.py).
//
//   out[n] = sum_k weight[n,k] * (M[n,k] @ bilinear(x[src[n,k]], affine[n,k]) + b[n,k])
//
// Sampling follows F.affine_grid + F.grid_sample (bilinear, align_corners=False)
// exactly, including the padding modes. No grid and no per-tap image is ever
// stored: each output pixel is accumulated over the taps in registers. The
// images are read channels-last (one transposed copy of x per call), so a
// bilinear corner pair is 2 * Ch contiguous values.
//
// Parallelism uses ATen's parallel_for (OpenMP in PyTorch's Linux builds):
// the forward over (output row n, image row y); the backward over source
// images b, each thread owning every tap that reads its b. Every gradient is
// therefore written by exactly one thread, in a fixed order: the backward is
// deterministic whatever the number of threads.

#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/types.h>

#include <array>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

namespace augnet {
namespace {

enum Padding { kZeros = 0, kBorder = 1, kReflection = 2 };

Padding parse_padding(c10::string_view padding) {
  if (padding == "zeros") return kZeros;
  if (padding == "border") return kBorder;
  if (padding == "reflection") return kReflection;
  TORCH_CHECK(false, "tap_mix: padding must be 'zeros', 'border' or 'reflection', got '", std::string(padding), "'");
}

// Clip to [0, size - 1]; the gradient is 0 where the value is clipped.
template <typename T>
inline T clip(T in, int64_t size, T* grad) {
  const T hi = static_cast<T>(size - 1);
  if (in <= T(0)) {
    *grad = T(0);
    return T(0);
  }
  if (in >= hi) {
    *grad = T(0);
    return hi;
  }
  *grad = T(1);
  return in;
}

// Reflect about [twice_low / 2, twice_high / 2]; the gradient is +-1.
template <typename T>
inline T reflect(T in, T twice_low, T twice_high, T* grad) {
  if (twice_low == twice_high) {
    *grad = T(0);
    return T(0);
  }
  const T lo = twice_low / 2;
  const T span = (twice_high - twice_low) / 2;
  T sign = T(1);
  in = in - lo;
  if (in < T(0)) {
    sign = T(-1);
    in = -in;
  }
  const T extra = std::fmod(in, span);
  const int64_t flips = static_cast<int64_t>(std::floor(in / span));
  if (flips % 2 == 0) {
    *grad = sign;
    return extra + lo;
  }
  *grad = -sign;
  return span - extra + lo;
}

// Normalised coordinate -> pixel index (align_corners=False) with padding;
// *grad = d index / d coordinate. The padding is a template parameter so the
// per-row loops that call this stay branch-free (and vectorisable) for zeros
// and border padding.
template <typename T, Padding P>
inline T source_index(T coord, int64_t size, T* grad) {
  const T fsize = static_cast<T>(size);
  T g = fsize / 2;
  T ix = ((coord + T(1)) * fsize - T(1)) / 2;
  if (P == kBorder) {
    const T hi = fsize - 1;
    g = (ix > T(0) && ix < hi) ? g : T(0);
    ix = ix > T(0) ? ix : T(0);  // also maps NaN to 0
    ix = ix < hi ? ix : hi;
  } else if (P == kReflection) {
    T gr, gc;
    // Bound the index before reflecting: an extreme (finite) warp overflows to +-inf here, and
    // fmod(inf) is NaN. Beyond 2^24 pixels float32 has no sub-pixel resolution left anyway.
    const T big = T(16777216);
    ix = ix > -big ? (ix < big ? ix : big) : -big;
    ix = reflect(ix, T(-1), static_cast<T>(2 * size - 1), &gr);
    ix = clip(ix, size, &gc);
    g = g * gr * gc;
  } else {
    // Zeros: far outside the image every corner reads 0 and the gradient is 0;
    // bounding the index keeps the integer conversion below defined.
    const T lo = T(-2), hi = fsize + 1;
    ix = ix > lo ? ix : lo;  // also maps NaN out of the image
    ix = ix < hi ? ix : hi;
  }
  *grad = g;
  return ix;
}

// Sampling positions of one output row for one tap (the vectorisable part).
template <typename T, Padding P>
inline void row_positions(const T* a, int64_t y, int64_t h, int64_t w, T* ix, T* iy, T* dix, T* diy) {
  const T gy = (2 * y + 1) / static_cast<T>(h) - 1;
  const T inv_w = T(1) / static_cast<T>(w);
  const T sx_row = a[1] * gy + a[2], sy_row = a[4] * gy + a[5];
  for (int xx = 0; xx < static_cast<int>(w); ++xx) {
    const T gx = (2 * static_cast<T>(xx) + 1) * inv_w - 1;
    ix[xx] = source_index<T, P>(a[0] * gx + sx_row, w, &dix[xx]);
    iy[xx] = source_index<T, P>(a[3] * gx + sy_row, h, &diy[xx]);
  }
}

template <typename T>
inline int64_t fast_floor(T v) {
  const int64_t i = static_cast<int64_t>(v);
  return i - (static_cast<T>(i) > v);
}

// The four bilinear corners of one sample point, for images stored
// channels-last (HWC): pixel offsets, validity and bilinear weights. Used for
// points near or outside the border; interior points take a check-free path.
template <typename T>
struct Corners {
  int64_t o00, o01, o10, o11;  // pixel offsets (0 for corners outside)
  T wx0, wx1, wy0, wy1;
  bool v00, v01, v10, v11;

  Corners(T ix, T iy, int64_t w, int64_t h) {
    const int64_t x0 = fast_floor(ix), y0 = fast_floor(iy);
    wx1 = ix - static_cast<T>(x0);
    wx0 = T(1) - wx1;
    wy1 = iy - static_cast<T>(y0);
    wy0 = T(1) - wy1;
    const bool vx0 = x0 >= 0 && x0 < w, vx1 = x0 + 1 >= 0 && x0 + 1 < w;
    const bool vy0 = y0 >= 0 && y0 < h, vy1 = y0 + 1 >= 0 && y0 + 1 < h;
    v00 = vy0 && vx0;
    v01 = vy0 && vx1;
    v10 = vy1 && vx0;
    v11 = vy1 && vx1;
    const int64_t base = y0 * w + x0;
    o00 = v00 ? base : 0;
    o01 = v01 ? base + 1 : 0;
    o10 = v10 ? base + w : 0;
    o11 = v11 ? base + w + 1 : 0;
  }

  // Corner values of channel c (0 outside the image); img is HWC with ch channels.
  inline void values(const T* img, int64_t c, int64_t ch, T* c00, T* c01, T* c10, T* c11) const {
    *c00 = v00 ? img[o00 * ch + c] : T(0);
    *c01 = v01 ? img[o01 * ch + c] : T(0);
    *c10 = v10 ? img[o10 * ch + c] : T(0);
    *c11 = v11 ? img[o11 * ch + c] : T(0);
  }

  // Scatter g through the corners into channel c of an HWC gradient image.
  inline void scatter(T* gimg, int64_t c, int64_t ch, T g) const {
    if (v00) gimg[o00 * ch + c] += g * wy0 * wx0;
    if (v01) gimg[o01 * ch + c] += g * wy0 * wx1;
    if (v10) gimg[o10 * ch + c] += g * wy1 * wx0;
    if (v11) gimg[o11 * ch + c] += g * wy1 * wx1;
  }
};

struct Shape {
  int64_t b, ch, h, w, n, k;
};

void check_inputs(const at::Tensor& x, const at::Tensor& src, const at::Tensor& affine,
                  const c10::optional<at::Tensor>& color, const at::Tensor& weight, Shape* s) {
  TORCH_CHECK(x.dim() == 4, "tap_mix: x must be a (B, Ch, H, W) tensor, got ", x.dim(), " dimensions");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
              "tap_mix: x must be float32 or float64, got ", x.scalar_type());
  TORCH_CHECK(src.dim() == 2, "tap_mix: src must be an (N, K) tensor, got ", src.dim(), " dimensions");
  TORCH_CHECK(src.scalar_type() == at::kLong, "tap_mix: src must be int64, got ", src.scalar_type());
  s->b = x.size(0);
  s->ch = x.size(1);
  s->h = x.size(2);
  s->w = x.size(3);
  s->n = src.size(0);
  s->k = src.size(1);
  TORCH_CHECK(s->k >= 1, "tap_mix: need at least one tap (K >= 1), got K = 0");
  TORCH_CHECK(affine.dim() == 4 && affine.size(0) == s->n && affine.size(1) == s->k && affine.size(2) == 2 &&
                  affine.size(3) == 3,
              "tap_mix: affine must have shape (N, K, 2, 3) = (", s->n, ", ", s->k, ", 2, 3), got ", affine.sizes());
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == s->n && weight.size(1) == s->k,
              "tap_mix: weight must have shape (N, K) = (", s->n, ", ", s->k, "), got ", weight.sizes());
  TORCH_CHECK(affine.scalar_type() == x.scalar_type(), "tap_mix: affine must have the dtype of x (", x.scalar_type(),
              "), got ", affine.scalar_type());
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), "tap_mix: weight must have the dtype of x (", x.scalar_type(),
              "), got ", weight.scalar_type());
  const auto dev = x.device();
  TORCH_CHECK(src.device() == dev, "tap_mix: src is on ", src.device(), " but x is on ", dev);
  TORCH_CHECK(affine.device() == dev, "tap_mix: affine is on ", affine.device(), " but x is on ", dev);
  TORCH_CHECK(weight.device() == dev, "tap_mix: weight is on ", weight.device(), " but x is on ", dev);
  if (color.has_value() && color->defined()) {
    const auto& c = *color;
    TORCH_CHECK(c.dim() == 4 && c.size(0) == s->n && c.size(1) == s->k && c.size(2) == s->ch &&
                    c.size(3) == s->ch + 1,
                "tap_mix: color must have shape (N, K, Ch, Ch + 1) = (", s->n, ", ", s->k, ", ", s->ch, ", ",
                s->ch + 1, "), got ", c.sizes());
    TORCH_CHECK(c.scalar_type() == x.scalar_type(), "tap_mix: color must have the dtype of x (", x.scalar_type(),
                "), got ", c.scalar_type());
    TORCH_CHECK(c.device() == dev, "tap_mix: color is on ", c.device(), " but x is on ", dev);
  }
  TORCH_CHECK(dev.is_cpu(), "tap_mix: the CPU kernel got tensors on ", dev);
  if (s->n > 0) {
    TORCH_CHECK(s->b > 0, "tap_mix: x is an empty batch but src asks for source rows");
    const auto lo = src.min().item<int64_t>();
    const auto hi = src.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < s->b, "tap_mix: src indices must lie in [0, ", s->b - 1, "], got values in [", lo,
                ", ", hi, "]");
  }
}

inline bool has_color(const c10::optional<at::Tensor>& color) { return color.has_value() && color->defined(); }

inline bool interior(int64_t x0, int64_t y0, int64_t w, int64_t h) {
  return static_cast<uint64_t>(x0) < static_cast<uint64_t>(w - 1) &&
         static_cast<uint64_t>(y0) < static_cast<uint64_t>(h - 1);
}

// Forward. Images are read channels-last (xt: B x H x W x Ch), so the two
// corners of a bilinear row are 2 * Ch contiguous values. For each output row
// the sampling positions of all K taps are computed first (vectorisable), then
// each output pixel accumulates its K taps in registers and is written once.
template <typename T, int kCh, Padding P>
void forward_kernel(const at::Tensor& xt, const at::Tensor& src, const at::Tensor& affine, const at::Tensor& color,
                    const at::Tensor& weight, const Shape& s, at::Tensor& out) {
  const int64_t ch = kCh > 0 ? kCh : s.ch, cc = ch + 1, hw = s.h * s.w, w = s.w, h = s.h, nk = s.k;
  const T* xp = xt.data_ptr<T>();
  const int64_t* sp = src.data_ptr<int64_t>();
  const T* ap = affine.data_ptr<T>();
  const T* cp = color.defined() ? color.data_ptr<T>() : nullptr;
  const T* wp = weight.data_ptr<T>();
  T* op = out.data_ptr<T>();
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, w * nk * ch));
  at::parallel_for(0, s.n * h, grain, [&](int64_t begin, int64_t end) {
    std::vector<T> buf(4 * nk * w + 2 * ch);
    T *ix = buf.data(), *iy = ix + nk * w, *dix = iy + nk * w, *diy = dix + nk * w;
    T* acc = diy + nk * w;
    T* v = acc + ch;
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / h, y = row % h;
      for (int64_t k = 0; k < nk; ++k) {
        row_positions<T, P>(ap + (n * nk + k) * 6, y, h, w, ix + k * w, iy + k * w, dix + k * w, diy + k * w);
      }
      T* orow = op + n * ch * hw + y * w;  // channel c at orow + c * hw
      for (int64_t xx = 0; xx < w; ++xx) {
        for (int64_t c = 0; c < ch; ++c) acc[c] = 0;
        for (int64_t k = 0; k < nk; ++k) {
          const int64_t tap = n * nk + k;
          const T* img = xp + sp[tap] * hw * ch;
          const T px = ix[k * w + xx], py = iy[k * w + xx];
          const int64_t x0 = fast_floor(px), y0 = fast_floor(py);
          const T wx1 = px - static_cast<T>(x0), wy1 = py - static_cast<T>(y0);
          const T wx0 = T(1) - wx1, wy0 = T(1) - wy1;
          if (interior(x0, y0, w, h)) {
            const T* p0 = img + (y0 * w + x0) * ch;
            const T* p1 = p0 + w * ch;
            for (int64_t c = 0; c < ch; ++c) {
              v[c] = wy0 * (wx0 * p0[c] + wx1 * p0[ch + c]) + wy1 * (wx0 * p1[c] + wx1 * p1[ch + c]);
            }
          } else {
            const Corners<T> q(px, py, w, h);
            for (int64_t c = 0; c < ch; ++c) {
              T c00, c01, c10, c11;
              q.values(img, c, ch, &c00, &c01, &c10, &c11);
              v[c] = wy0 * (wx0 * c00 + wx1 * c01) + wy1 * (wx0 * c10 + wx1 * c11);
            }
          }
          const T wt = wp[tap];
          if (cp == nullptr) {
            for (int64_t c = 0; c < ch; ++c) acc[c] += wt * v[c];
          } else {
            const T* m = cp + tap * ch * cc;
            for (int64_t c = 0; c < ch; ++c) {
              const T* mr = m + c * cc;
              T o = mr[ch];
              for (int64_t j = 0; j < ch; ++j) o += mr[j] * v[j];
              acc[c] += wt * o;
            }
          }
        }
        for (int64_t c = 0; c < ch; ++c) orow[c * hw + xx] = acc[c];
      }
    }
  });
}

// Backward. One thread per source image b handles every tap that reads b, so
// the scatter into b's gradient and each tap's own reductions have a single
// writer and a fixed order. gxt is channels-last like xt.
template <typename T, int kCh, Padding P>
void backward_kernel(const at::Tensor& g, const at::Tensor& xt, const at::Tensor& affine, const at::Tensor& color,
                     const at::Tensor& weight, const Shape& s, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& order, bool need_x, at::Tensor& gxt, at::Tensor& grad_affine,
                     at::Tensor& grad_color, at::Tensor& grad_weight) {
  using Acc = at::acc_type<T, /*is_cuda=*/false>;
  const int64_t ch = kCh > 0 ? kCh : s.ch, cc = ch + 1, hw = s.h * s.w, w = s.w, h = s.h;
  const T* xp = xt.data_ptr<T>();
  const T* gp = g.data_ptr<T>();
  const T* ap = affine.data_ptr<T>();
  const bool use_color = color.defined();
  const T* cp = use_color ? color.data_ptr<T>() : nullptr;
  const T* wp = weight.data_ptr<T>();
  // grad_out is read through its strides: an expanded (out.sum()) or
  // channels-last gradient needs no copy.
  const int64_t gs0 = g.stride(0), gs1 = g.stride(1), gs2 = g.stride(2), gs3 = g.stride(3);
  T* gxp = gxt.data_ptr<T>();
  T* gap = grad_affine.data_ptr<T>();
  T* gcp = use_color ? grad_color.data_ptr<T>() : nullptr;
  T* gwp = grad_weight.data_ptr<T>();

  at::parallel_for(0, s.b, 1, [&](int64_t b_begin, int64_t b_end) {
    std::vector<T> buf(4 * w + 3 * ch);
    T *ix = buf.data(), *iy = ix + w, *dix = iy + w, *diy = dix + w;
    T* v = diy + w;   // sampled values
    T* gv = v + ch;   // gradient of the sampled values
    T* gc = gv + ch;  // incoming gradient at the pixel
    std::vector<Acc> acc_color(use_color ? ch * cc : 0);
    for (int64_t b = b_begin; b < b_end; ++b) {
      const T* img = xp + b * hw * ch;
      T* gimg = gxp + b * hw * ch;
      for (int64_t i = start[b]; i < start[b + 1]; ++i) {
        const int64_t tap = order[i];
        const int64_t n = tap / s.k;
        const T* a = ap + tap * 6;
        const T wt = wp[tap];
        const T* m = use_color ? cp + tap * ch * cc : nullptr;
        const T* gout = gp + n * gs0;
        Acc acc_w = 0, acc_a[6] = {0, 0, 0, 0, 0, 0};
        std::fill(acc_color.begin(), acc_color.end(), Acc(0));
        const T inv_w = T(1) / static_cast<T>(w);
        for (int64_t y = 0; y < h; ++y) {
          row_positions<T, P>(a, y, h, w, ix, iy, dix, diy);
          const T gy = (2 * y + 1) / static_cast<T>(h) - 1;
          // Row partial sums in T (promoted to Acc once per row).
          T row_w = 0, row_a[4] = {0, 0, 0, 0};
          const T* grow = gout + y * gs2;
          for (int64_t xx = 0; xx < w; ++xx) {
            for (int64_t c = 0; c < ch; ++c) gc[c] = grow[c * gs1 + xx * gs3];
            if (m == nullptr) {
              for (int64_t j = 0; j < ch; ++j) gv[j] = wt * gc[j];
            } else {
              for (int64_t j = 0; j < ch; ++j) {
                T sum = 0;
                for (int64_t c = 0; c < ch; ++c) sum += gc[c] * m[c * cc + j];
                gv[j] = wt * sum;
              }
            }
            const int64_t x0 = fast_floor(ix[xx]), y0 = fast_floor(iy[xx]);
            const T wx1 = ix[xx] - static_cast<T>(x0), wy1 = iy[xx] - static_cast<T>(y0);
            const T wx0 = T(1) - wx1, wy0 = T(1) - wy1;
            T dvx = 0, dvy = 0;  // sum_j grad_v_j * d v_j / d ix (resp. iy)
            if (interior(x0, y0, w, h)) {
              const int64_t off = (y0 * w + x0) * ch;
              const T* p0 = img + off;
              const T* p1 = p0 + w * ch;
              const T w00 = wy0 * wx0, w01 = wy0 * wx1, w10 = wy1 * wx0, w11 = wy1 * wx1;
              for (int64_t j = 0; j < ch; ++j) {
                const T c00 = p0[j], c01 = p0[ch + j], c10 = p1[j], c11 = p1[ch + j];
                v[j] = w00 * c00 + w01 * c01 + w10 * c10 + w11 * c11;
                dvx += gv[j] * (wy0 * (c01 - c00) + wy1 * (c11 - c10));
                dvy += gv[j] * (wx0 * (c10 - c00) + wx1 * (c11 - c01));
              }
              if (need_x) {
                T* q0 = gimg + off;  // this thread owns image b
                T* q1 = q0 + w * ch;
                for (int64_t j = 0; j < ch; ++j) {
                  q0[j] += gv[j] * w00;
                  q0[ch + j] += gv[j] * w01;
                  q1[j] += gv[j] * w10;
                  q1[ch + j] += gv[j] * w11;
                }
              }
            } else {
              const Corners<T> q(ix[xx], iy[xx], w, h);
              for (int64_t j = 0; j < ch; ++j) {
                T c00, c01, c10, c11;
                q.values(img, j, ch, &c00, &c01, &c10, &c11);
                v[j] = wy0 * (wx0 * c00 + wx1 * c01) + wy1 * (wx0 * c10 + wx1 * c11);
                dvx += gv[j] * (wy0 * (c01 - c00) + wy1 * (c11 - c10));
                dvy += gv[j] * (wx0 * (c10 - c00) + wx1 * (c11 - c01));
                if (need_x) q.scatter(gimg, j, ch, gv[j]);
              }
            }
            if (m == nullptr) {
              for (int64_t c = 0; c < ch; ++c) row_w += gc[c] * v[c];
            } else {
              for (int64_t c = 0; c < ch; ++c) {
                const T* mr = m + c * cc;
                T o = mr[ch];
                for (int64_t j = 0; j < ch; ++j) o += mr[j] * v[j];
                row_w += gc[c] * o;
                Acc* ar = acc_color.data() + c * cc;
                for (int64_t j = 0; j < ch; ++j) ar[j] += static_cast<Acc>(gc[c]) * v[j];
                ar[ch] += gc[c];
              }
            }
            const T gx = (2 * static_cast<T>(xx) + 1) * inv_w - 1;
            const T gsx = dvx * dix[xx], gsy = dvy * diy[xx];
            row_a[0] += gsx * gx;
            row_a[1] += gsx;
            row_a[2] += gsy * gx;
            row_a[3] += gsy;
          }
          // The gy terms are constant along the row.
          acc_w += row_w;
          acc_a[0] += row_a[0];
          acc_a[1] += static_cast<Acc>(row_a[1]) * gy;
          acc_a[2] += row_a[1];
          acc_a[3] += row_a[2];
          acc_a[4] += static_cast<Acc>(row_a[3]) * gy;
          acc_a[5] += row_a[3];
        }
        gwp[tap] = static_cast<T>(acc_w);
        for (int e = 0; e < 6; ++e) gap[tap * 6 + e] = static_cast<T>(acc_a[e]);
        if (use_color) {
          for (int64_t e = 0; e < ch * cc; ++e) gcp[tap * ch * cc + e] = static_cast<T>(wt * acc_color[e]);
        }
      }
    }
  });
}

// Instantiations by channel count (1 and 3 unroll) and padding mode.
#define AUGNET_BY_PADDING(KERNEL, T, CH, ...)                  \
  switch (padding) {                                           \
    case kZeros:                                               \
      KERNEL<T, CH, kZeros>(__VA_ARGS__);                      \
      break;                                                   \
    case kBorder:                                              \
      KERNEL<T, CH, kBorder>(__VA_ARGS__);                     \
      break;                                                   \
    default:                                                   \
      KERNEL<T, CH, kReflection>(__VA_ARGS__);                 \
  }

#define AUGNET_BY_CHANNELS(KERNEL, T, ...)                     \
  switch (s.ch) {                                              \
    case 1:                                                    \
      AUGNET_BY_PADDING(KERNEL, T, 1, __VA_ARGS__) break;      \
    case 3:                                                    \
      AUGNET_BY_PADDING(KERNEL, T, 3, __VA_ARGS__) break;      \
    default:                                                   \
      AUGNET_BY_PADDING(KERNEL, T, 0, __VA_ARGS__)             \
  }

at::Tensor tap_mix_cpu(const at::Tensor& x_in, const at::Tensor& src_in, const at::Tensor& affine_in,
                       const c10::optional<at::Tensor>& color_in, const at::Tensor& weight_in,
                       c10::string_view padding_name) {
  Shape s;
  check_inputs(x_in, src_in, affine_in, color_in, weight_in, &s);
  const Padding padding = parse_padding(padding_name);
  const auto xt = x_in.permute({0, 2, 3, 1}).contiguous();  // channels-last (free if x is channels_last)
  const auto src = src_in.contiguous();
  const auto affine = affine_in.contiguous();
  const auto weight = weight_in.contiguous();
  const bool use_color = has_color(color_in);
  const auto color = use_color ? color_in->contiguous() : at::Tensor();
  auto out = at::empty({s.n, s.ch, s.h, s.w}, x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (s.n == 0) return out;

  AT_DISPATCH_FLOATING_TYPES(x_in.scalar_type(), "tap_mix_cpu", [&] {
    AUGNET_BY_CHANNELS(forward_kernel, scalar_t, xt, src, affine, color, weight, s, out)
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tap_mix_backward_cpu(
    const at::Tensor& grad_in, const at::Tensor& x_in, const at::Tensor& src_in, const at::Tensor& affine_in,
    const c10::optional<at::Tensor>& color_in, const at::Tensor& weight_in, c10::string_view padding_name,
    std::array<bool, 4> output_mask) {
  Shape s;
  check_inputs(x_in, src_in, affine_in, color_in, weight_in, &s);
  TORCH_CHECK(grad_in.dim() == 4 && grad_in.size(0) == s.n && grad_in.size(1) == s.ch && grad_in.size(2) == s.h &&
                  grad_in.size(3) == s.w,
              "tap_mix_backward: grad_out must have shape (N, Ch, H, W), got ", grad_in.sizes());
  TORCH_CHECK(grad_in.scalar_type() == x_in.scalar_type(), "tap_mix_backward: grad_out must have the dtype of x");
  const Padding padding = parse_padding(padding_name);
  const auto& g = grad_in;  // any strides (see backward_kernel)
  const auto xt = x_in.permute({0, 2, 3, 1}).contiguous();  // channels-last
  const auto src = src_in.contiguous();
  const auto affine = affine_in.contiguous();
  const auto weight = weight_in.contiguous();
  const bool use_color = has_color(color_in);
  const auto color = use_color ? color_in->contiguous() : at::Tensor();

  auto gxt = at::zeros_like(xt);
  auto grad_affine = at::zeros_like(affine);
  auto grad_color = use_color ? at::zeros_like(color) : at::empty({0}, x_in.options());
  auto grad_weight = at::zeros_like(weight);
  if (s.n == 0) return {at::zeros({s.b, s.ch, s.h, s.w}, x_in.options()), grad_affine, grad_color, grad_weight};

  // Taps grouped by source image, in (n, k) order: a counting sort on src.
  const int64_t taps = s.n * s.k;
  std::vector<int64_t> start(s.b + 1, 0), order(taps);
  const int64_t* sp = src.data_ptr<int64_t>();
  for (int64_t t = 0; t < taps; ++t) ++start[sp[t] + 1];
  for (int64_t b = 0; b < s.b; ++b) start[b + 1] += start[b];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t t = 0; t < taps; ++t) order[fill[sp[t]]++] = t;
  }

  AT_DISPATCH_FLOATING_TYPES(x_in.scalar_type(), "tap_mix_backward_cpu", [&] {
    AUGNET_BY_CHANNELS(backward_kernel, scalar_t, g, xt, affine, color, weight, s, start, order, output_mask[0], gxt,
                       grad_affine, grad_color, grad_weight)
  });
  return {gxt.permute({0, 3, 1, 2}).contiguous(), grad_affine, grad_color, grad_weight};
}

}  // namespace

TORCH_LIBRARY(augnet, m) {
  m.def("tap_mix(Tensor x, Tensor src, Tensor affine, Tensor? color, Tensor weight, str padding) -> Tensor");
  m.def(
      "tap_mix_backward(Tensor grad_out, Tensor x, Tensor src, Tensor affine, Tensor? color, Tensor weight, "
      "str padding, bool[4] output_mask) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(augnet, CPU, m) {
  m.impl("tap_mix", &tap_mix_cpu);
  m.impl("tap_mix_backward", &tap_mix_backward_cpu);
}

}  // namespace augnet

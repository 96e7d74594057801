// augnet::tap_mix on CPU: a weighted sum of warped, colour-mapped taps of
// source images, for all output rows in one pass (see augnet/ops/dispatch.py).
//
//   out[n] = sum_k weight[n,k] * (M[n,k] @ bilinear(x[src[n,k]], affine[n,k]) + b[n,k])
//
// Sampling follows F.affine_grid + F.grid_sample (bilinear, align_corners=False)
// exactly, including the padding modes. No grid and no per-tap image is ever
// stored: an output row is accumulated over the taps in a row of scratch
// vectors (one row per output channel with a colour map) and written once.
//
// How the work is laid out (benchmarks/callgrind_tap_mix.py counts it):
//
// * Padded, channels-last images. Each call copies x once into
//   (B, H + 4, W + 4, Cp): a border of two zero pixels on every side, and the
//   channels padded with zeros to a stride Cp. Every bilinear corner of every
//   sample then lies inside the buffer (coordinates are clamped to [-2, W]
//   for zeros padding, [0, W - 1] otherwise), and a corner outside the image
//   reads the zero it stands for: no bounds checks, no border special case.
//
// * Coordinates once per pixel and tap, SIMD over pixels. For one tap and one
//   output row, the sampling positions of a run of Vec::size() contiguous
//   pixels are computed together with at::vec::Vectorized (an affine function
//   of the pixel's normalised x, then the padding mode, compile-time): corner
//   offset, bilinear weights and (backward) d index / d coordinate, stored in
//   a small per-row table that every channel then reuses.
//
// * Pair vectors for the corners. With Cp = Vec::size() / 2 (float: 8 lanes,
//   Ch <= 4; double: 4 lanes, Ch <= 2), the two corners (x0, x0 + 1) of a
//   sample row are 2 * Cp contiguous values: one unaligned vector load each
//   for the rows y0 and y0 + 1, and the bilinear mix of all channels is two
//   multiply-adds. On this project's CPU (AMD EPYC, Zen 4) this beats
//   gathering each corner with AVX2/AVX-512 gathers (three to four times
//   slower) and scalar loads (twice as slow). Larger channel counts take a
//   scalar-load path over the same tables (Cp = Ch).
//
// * Parallelism uses ATen's parallel_for (OpenMP in PyTorch's Linux builds).
//   Forward: over (output row n, image row y); every output value is written
//   once. Backward: every tap's reductions (affine, weight, colour gradients)
//   are summed in registers over a band of about 256 output pixels (float
//   vectors: each lane one partial sum; the scalar-load path sums each row in
//   T), one double slot per (tap, band), and the slots are added in a fixed
//   order at the end. Without a gradient for x the work items are (output row
//   n, band): as many as the hardware can use. With one, each source image b
//   is owned by one work item that handles every tap reading b, so its
//   gradient has a single writer; its pair vectors go to one of two buffers by
//   the parity of x0 (see tap_mix_backward_cpu). The work of an item never
//   depends on the thread count: the backward is bitwise the same for any
//   number of threads, and each gradient is bitwise the same whatever else is
//   asked for.

// ATen compiles Vectorized for the CPU capability of each of its kernels; an
// extension says which one it targets. With AVX2 + FMA (-march=native on
// x86-64, or -march=x86-64-v3), the 256-bit implementation, also on AVX-512
// machines: its 8 floats are exactly two corners of 4 channels, and valgrind,
// which counts the instructions, cannot run AVX-512. Elsewhere (another
// architecture, or AUGNET_CXXFLAGS without them) Vectorized is ATen's
// portable implementation, or NEON on aarch64.
#if !defined(CPU_CAPABILITY) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_CAPABILITY AVX2
#define CPU_CAPABILITY_AVX2
#endif

#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>
#include <torch/types.h>
#include <torch/version.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace augnet {
namespace {

using at::vec::Vectorized;
template <typename T>
using Int = at::vec::int_same_size_t<T>;  // corner offsets: int32 for float, int64 for double

enum Padding { kZeros = 0, kBorder = 1, kReflection = 2 };

Padding parse_padding(c10::string_view padding) {
  if (padding == "zeros") return kZeros;
  if (padding == "border") return kBorder;
  if (padding == "reflection") return kReflection;
  TORCH_CHECK(false, "tap_mix: padding must be 'zeros', 'border' or 'reflection', got '", std::string(padding), "'");
}

constexpr int64_t kPad = 2;  // zero pixels around each padded image, on every side
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

// ------------------------------------------------------------------ layout

// Sizes of one call and of its padded images.
struct Geometry {
  int64_t b, ch, h, w, n, k;  // x is (b, ch, h, w); src is (n, k)
  int64_t cp;                 // channel stride of the padded images: Vec::size() / 2 (pair path) or ch
  int64_t pw, ph;             // padded width and height, w + 2 kPad and h + 2 kPad
  int64_t row;                // values per padded image row, pw * cp
  int64_t image;              // values per padded image, ph * row
  int64_t wv;                 // w rounded up to whole vectors: the length of the per-row tables
  bool float_offsets;         // offsets are exact in T arithmetic (below 2^24 for float)
};

template <typename T>
Geometry make_geometry(const Shape& s, bool pair) {
  constexpr int64_t kV = Vectorized<T>::size();
  Geometry g{s.b, s.ch, s.h, s.w, s.n, s.k, 0, 0, 0, 0, 0, 0, false};
  g.cp = pair ? kV / 2 : s.ch;
  g.pw = s.w + 2 * kPad;
  g.ph = s.h + 2 * kPad;
  g.row = g.pw * g.cp;
  g.image = g.ph * g.row;
  g.wv = (s.w + kV - 1) / kV * kV;
  g.float_offsets = g.image < (int64_t(1) << std::numeric_limits<T>::digits);
  // Corner offsets within an image are lanes of Int<T> (int32 for float).
  TORCH_CHECK(g.image < static_cast<int64_t>(std::numeric_limits<Int<T>>::max()),
              "tap_mix: the CPU kernel takes images of up to 2^31 values (padded), got ", s.ch, " x ", s.h, " x ",
              s.w);
  return g;
}

// Whether the pair-vector path takes this channel count (see the header).
template <typename T>
bool pair_path(int64_t ch) {
  return ch <= Vectorized<T>::size() / 2;
}

// The padded images' buffer seen as (B, H, W, Ch): where x goes, and where its gradient comes from
// (`part` 1: the second set of images of a buffer that holds two).
at::Tensor interior(const at::Tensor& buffer, const Geometry& g, int64_t part = 0) {
  return buffer.narrow(0, part * g.b * g.image, g.b * g.image)
      .view({g.b, g.ph, g.pw, g.cp})
      .narrow(1, kPad, g.h)
      .narrow(2, kPad, g.w)
      .narrow(3, 0, g.ch);
}

// A buffer of vectors (aligned), for tables and rows of scratch values.
template <typename T>
class Scratch {
 public:
  explicit Scratch(int64_t values) : data_((values + Vectorized<T>::size() - 1) / Vectorized<T>::size()) {}
  T* get() { return reinterpret_cast<T*>(data_.data()); }

 private:
  std::vector<Vectorized<T>> data_;
};

// x copied into zero-padded, channels-last images (plus some slack at the end).
// Contiguous x with the pair layout: per image row, blocks of Vec::size() pixels
// of all channels transposed from (channel, pixel) to (pixel, channel); else ATen's copy.
template <typename T>
at::Tensor padded_images(const at::Tensor& x, const Geometry& g) {
  using V = Vectorized<T>;
  constexpr int64_t kV = V::size();
  if (!(x.is_contiguous() && g.cp == kV / 2)) {
    auto buffer = at::zeros({g.b * g.image + 64}, x.options());
    interior(buffer, g).copy_(x.permute({0, 2, 3, 1}));
    return buffer;
  }
  auto buffer = at::empty({g.b * g.image + 64}, x.options());
  const T* xp = x.data_ptr<T>();
  T* bp = buffer.data_ptr<T>();
  const int64_t hw = g.h * g.w, cp = g.cp, right = (g.pw - kPad - g.w) * cp;
  std::fill(bp + g.b * g.image, bp + g.b * g.image + 64, T(0));
  at::parallel_for(0, g.b * g.ph, std::max<int64_t>(1, 16384 / g.row), [&](int64_t begin, int64_t end) {
    Scratch<T> planes(2 * kV * kV);
    T* plane = planes.get();
    T* tr = plane + kV * kV;
    std::fill(plane, plane + kV * kV, T(0));  // rows past ch stay 0: the padded channels
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / g.ph, y = r % g.ph - kPad;
      T* dst = bp + b * g.image + (y + kPad) * g.row;
      if (y < 0 || y >= g.h) {
        std::fill(dst, dst + g.row, T(0));
        continue;
      }
      std::fill(dst, dst + kPad * cp, T(0));
      const T* src = xp + b * g.ch * hw + y * g.w;
      T* out = dst + kPad * cp;
      for (int64_t x0 = 0; x0 < g.w; x0 += kV) {
        const int64_t count = std::min<int64_t>(kV, g.w - x0);
        for (int64_t c = 0; c < g.ch; ++c) V::loadu(src + c * hw + x0, count).store(plane + c * kV);
        at::vec::transpose_mxn<T, kV, kV>(plane, kV, tr, kV);
        // Pixel i's cp channels; each store's upper half is overwritten by the next pixel
        // (the last one's by the right border, written after).
        for (int64_t i = 0; i < count; ++i) V::loadu(tr + i * kV).store(out + (x0 + i) * cp);
      }
      std::fill(dst + (kPad + g.w) * cp, dst + (kPad + g.w) * cp + right, T(0));
    }
  });
  return buffer;
}

// The gradient of x from the pair path's two sets of padded images (see
// backward_kernel): their sum over the interior, back to (B, Ch, H, W)
// (contiguous), per image row with transposes of Vec::size() pixels.
template <typename T>
at::Tensor unpacked_gradient(const at::Tensor& buffer, const Geometry& g) {
  using V = Vectorized<T>;
  constexpr int64_t kV = V::size(), kCp = kV / 2;
  auto out = at::empty({g.b, g.ch, g.h, g.w}, buffer.options());
  const T* first = buffer.data_ptr<T>();
  const T* second = first + g.b * g.image;
  T* op = out.data_ptr<T>();
  const int64_t hw = g.h * g.w;
  at::parallel_for(0, g.b * g.h, std::max<int64_t>(1, 16384 / g.row), [&](int64_t begin, int64_t end) {
    Scratch<T> scratch(2 * kV * kV + kV);
    T* sum = scratch.get();       // a block's pixels: kCp values each, then slack
    T* tr = sum + kV * kV + kV;  // (channel, pixel)
    std::fill(sum, sum + kV * kV + kV, T(0));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t b = r / g.h, y = r % g.h;
      const int64_t at = b * g.image + (y + kPad) * g.row + kPad * kCp;
      T* o = op + b * g.ch * hw + y * g.w;
      for (int64_t x = 0; x < g.w; x += kV) {
        const int64_t count = std::min<int64_t>(kV, g.w - x);
        // Two pixels per vector; past count the values are the border's (never stored).
        for (int64_t i = 0; i < kV * kCp; i += kV) {
          (V::loadu(first + at + x * kCp + i) + V::loadu(second + at + x * kCp + i)).store(sum + i);
        }
        // Rows read kV values from pixel i on: lane c < kCp is pixel i's channel c.
        at::vec::transpose_mxn<T, kV, kV>(sum, kCp, tr, kV);
        for (int64_t c = 0; c < g.ch; ++c) V::loadu(tr + c * kV).store(o + c * hw + x, count);
      }
    }
  });
  return out;
}

// The normalised x of each output column, F.affine_grid's (2 x + 1) / W - 1,
// for wv columns (those past w are computed and never used).
template <typename T>
std::vector<T> normalised_columns(const Geometry& g) {
  std::vector<T> gx(g.wv);
  const T inv_w = T(1) / static_cast<T>(g.w);
  for (int64_t x = 0; x < g.wv; ++x) gx[x] = (2 * static_cast<T>(x) + 1) * inv_w - 1;
  return gx;
}

template <typename T>
inline T normalised_row(int64_t y, int64_t h) {
  return (2 * y + 1) / static_cast<T>(h) - 1;
}

// ------------------------------------------------------------------ coordinates

// One tap's affine map from the normalised output coordinates (gx, gy) to the
// normalised input ones, a0 gx + a1 gy + a2 and a3 gx + a4 gy + a5 (F.affine_grid),
// each coefficient bounded to +-2^60: sample positions stay finite for any
// finite warp (an extreme one overflows otherwise, and inf - inf is NaN), far
// beyond the +-2^24 pixels where float32 has no sub-pixel resolution left.
template <typename T>
struct TapMap {
  T a0, a1, a2, a3, a4, a5;
};

inline double bounded(double v) {
  constexpr double big = 1152921504606846976.0;  // 2^60
  return v > big ? big : (v < -big ? -big : v);
}

template <typename T>
std::vector<TapMap<T>> tap_maps(const T* affine, int64_t taps) {
  std::vector<TapMap<T>> maps(taps);
  for (int64_t t = 0; t < taps; ++t) {
    const T* a = affine + t * 6;
    const auto b = [](T v) { return static_cast<T>(bounded(static_cast<double>(v))); };
    maps[t] = {b(a[0]), b(a[1]), b(a[2]), b(a[3]), b(a[4]), b(a[5])};
  }
  return maps;
}

// c - a * b: at::vec::fnmadd where torch has it for every type (2.11 does, 2.4 does not), else the unfused
// form, which gives the same here: a * b is a whole number below 2^24, and 0 or within a factor 2 of c, so
// both the product and the difference are exact.
template <typename T>
inline Vectorized<T> minus_product(const Vectorized<T>& a, const Vectorized<T>& b, const Vectorized<T>& c) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
  return at::vec::fnmadd(a, b, c);
#else
  return c - a * b;
#endif
}

// Pixel index -> padded index (the padding mode), for a vector of pixels;
// *grad = d index / d coordinate where the mode needs it per pixel.
template <typename T, Padding P, bool kGrad>
inline Vectorized<T> pad_index(Vectorized<T> ix, const Vectorized<T>& size, Vectorized<T>* grad) {
  using V = Vectorized<T>;
  const V zero(0), hi = size - V(1);
  if (P == kZeros) {
    // Beyond [-2, size] every corner reads the zero border and the gradient is 0 (the
    // constant size / 2 of zeros padding multiplies a zero difference).
    return at::vec::clamp_min(at::vec::clamp_max(ix, size), V(T(-2)));
  }
  V g = size * V(T(0.5));
  if (P == kReflection) {
    // Reflect about [-0.5, size - 0.5] (align_corners=False), as fmod would, exactly:
    // the quotient may round across an integer, which one correction step undoes.
    // Bounded first: beyond 2^24 pixels float32 has no sub-pixel resolution left.
    const V big(T(16777216)), lo(T(-0.5)), one(1);
    ix = at::vec::clamp_min(at::vec::clamp_max(ix, big), zero - big);
    V in = ix - lo;
    const V negative = in < zero;
    in = in.abs();
    V flips = (in / size).floor();
    V extra = minus_product(flips, size, in);  // in - flips * size
    const V under = extra < zero;
    extra = V::blendv(extra, extra + size, under);
    flips = V::blendv(flips, flips - one, under);
    const V over = extra >= size;
    extra = V::blendv(extra, extra - size, over);
    flips = V::blendv(flips, flips + one, over);
    const V odd = (flips - V(T(2)) * (flips * V(T(0.5))).floor()) == one;
    ix = V::blendv(extra + lo, size - extra + lo, odd);
    if (kGrad) {
      g = V::blendv(g, zero - g, negative);
      g = V::blendv(g, zero - g, odd);
    }
  }
  // Border (and reflection, whose result can still touch the ends): clip to [0, size - 1],
  // gradient 0 where clipped (at the ends included, as grid_sample's clip_coordinates).
  if (kGrad) *grad = V::blendv(zero, g, (ix > zero) & (ix < hi));
  return at::vec::clamp_max(at::vec::clamp_min(ix, zero), hi);
}

// The table of one tap for one output row: for each pixel, the offset of its
// (y0, x0) corner in the padded image, its bilinear weights (wx0, wx1 times a
// scale: the tap weight in the forward without colour map, else 1) and, for the
// backward, d index / d coordinate (border and reflection: 0 where clipped,
// signed by the reflection; zeros padding: the constant size / 2, applied at the
// end), the pixel's normalised gx and where its corners' gradient goes (see
// backward_kernel: one of two buffers, by the parity of x0). Stored in blocks of
// Vec::size() pixels, kJ vectors per block, so that one pointer reaches all of a
// pixel's values.
enum Slot { kOff = 0, kWx0, kWx1, kWy0, kWy1, kDix, kDiy, kGx, kScatterOff };
constexpr int kForwardSlots = 5, kBackwardSlots = 9;

// The call's constants of fill_table, as vectors (set up once per work item).
template <typename T>
struct TableConstants {
  using V = Vectorized<T>;
  using VI = Vectorized<Int<T>>;
  V w, h, half_w, half_h, one, fcp, frow, forigin;  // forigin: the offset of pixel (0, 0), (kPad pw + kPad) cp
  VI cp, row, origin, parity, second;
  bool float_offsets;
  TableConstants(const Geometry& g, int64_t second_images)
      : w(static_cast<T>(g.w)), h(static_cast<T>(g.h)), half_w(static_cast<T>(g.w) / 2),
        half_h(static_cast<T>(g.h) / 2), one(1), fcp(static_cast<T>(g.cp)),
        frow(static_cast<T>(g.row)), forigin(static_cast<T>(kPad * (g.row + g.cp))),
        cp(static_cast<Int<T>>(g.cp)), row(static_cast<Int<T>>(g.row)),
        origin(static_cast<Int<T>>(kPad * (g.row + g.cp))), parity(1),
        second(static_cast<Int<T>>(second_images)), float_offsets(g.float_offsets) {}
};

template <typename T, Padding P, bool kGrad>
void fill_table(const TapMap<T>& m, T gy, const TableConstants<T>& k, int64_t wv, const T* gxs, T scale, T* table,
                bool second = false) {
  using V = Vectorized<T>;
  using VI = Vectorized<Int<T>>;
  constexpr int64_t kV = V::size(), kJ = kGrad ? kBackwardSlots : kForwardSlots;
  // The row's part of the normalised coordinates, then per pixel the rest.
  const T cx = m.a1 * gy + m.a2, cy = m.a4 * gy + m.a5;
  const V a0(m.a0), vcx(cx), a3(m.a3), vcy(cy), minus_half(T(-0.5)), vscale(scale);
  // Local copies: the stores below may alias a vector in memory (__m256 is may_alias).
  const V w = k.w, h = k.h, half_w = k.half_w, half_h = k.half_h, one = k.one, fcp = k.fcp, frow = k.frow,
          forigin = k.forigin;
  const VI cp = k.cp, row = k.row, origin = k.origin, parity = k.parity, other = k.second;
  const bool float_offsets = k.float_offsets;
  T* block = table;
  for (int64_t x = 0; x < wv; x += kV, block += kJ * kV) {
    const V gx = V::loadu(gxs + x);
    V dx, dy;
    // In pixels as F.grid_sample (align_corners=False) computes it, ((c + 1) W - 1) / 2, with the
    // same roundings ((c + 1) (W / 2) - 1 / 2 is that exactly): a translation that lands on whole
    // pixels there lands on them here.
    const V ix = pad_index<T, P, kGrad>(at::vec::fmadd(at::vec::fmadd(a0, gx, vcx) + one, half_w, minus_half), w, &dx);
    const V iy = pad_index<T, P, kGrad>(at::vec::fmadd(at::vec::fmadd(a3, gx, vcy) + one, half_h, minus_half), h, &dy);
    const V fx = ix.floor(), fy = iy.floor();
    const V wx1 = ix - fx, wy1 = iy - fy;
    // The corner offset ((y0 + 2) pw + x0 + 2) cp, in T where that is exact (fewer instructions).
    const VI off = float_offsets
                       ? at::vec::convert_to_int_of_same_size(at::vec::fmadd(fy, frow, at::vec::fmadd(fx, fcp, forigin)))
                       : at::vec::convert_to_int_of_same_size(fy) * row + at::vec::convert_to_int_of_same_size(fx) * cp +
                             origin;
    off.store(block + kOff * kV);
    ((one - wx1) * vscale).store(block + kWx0 * kV);
    (wx1 * vscale).store(block + kWx1 * kV);
    (one - wy1).store(block + kWy0 * kV);
    wy1.store(block + kWy1 * kV);
    if (kGrad) {
      if (P != kZeros) {
        dx.store(block + kDix * kV);
        dy.store(block + kDiy * kV);
      }
      gx.store(block + kGx * kV);
      if (second) {
        // x0 odd -> the second buffer.
        const VI odd = at::vec::convert_to_int_of_same_size(fx) & parity;
        (off + odd * other).store(block + kScatterOff * kV);
      }
    }
  }
}

// Value j of pixel lane of a table block.
template <typename T>
inline T at_slot(const T* block, int j, int64_t lane) {
  return block[j * Vectorized<T>::size() + lane];
}
template <typename T>
inline Int<T> offset_at(const T* block, int64_t lane) {
  return reinterpret_cast<const Int<T>*>(block)[lane];
}

template <typename T>
struct Args {
  const T* x;  // padded images
  const int64_t* src;
  const TapMap<T>* maps;
  const T* color;  // nullptr without a colour map
  const T* weight;
};

// The pixel loop: body(block, lane, x) for every pixel; whole blocks with their
// lanes unrolled (constant offsets into the block), then the remaining pixels.
template <typename T, typename Body>
inline void for_each_pixel(const T* table, int64_t kJ, int64_t w, const Body& body) {
  constexpr int64_t kV = Vectorized<T>::size();
  int64_t x = 0;
  const T* block = table;
  for (; x + kV <= w; x += kV, block += kJ * kV) {
#pragma GCC unroll 16
    for (int64_t lane = 0; lane < kV; ++lane) body(block, lane, x + lane);
  }
  for (int64_t lane = 0; x + lane < w; ++lane) body(block, lane, x + lane);
}

// ------------------------------------------------------------------ forward

// Pair path: Cp = Vec::size() / 2 channels per corner, two corners per vector.
// Without colour map: taps outer, pixels inner, the row's sums in a row of pair
// vectors; at the end of the row one transpose per block of pixels folds the two
// corners' lanes and gives each channel's values of the block as one vector.
template <typename T, Padding P, bool kColor>
void forward_pair(const Args<T>& A, const Geometry& g, T* op) {
  using V = Vectorized<T>;
  constexpr int64_t kV = V::size(), kCp = kV / 2, kJ = kForwardSlots;
  constexpr int64_t kHigh = ((int64_t(1) << kV) - 1) & ~((int64_t(1) << kCp) - 1);  // lanes of corner x0 + 1
  const int64_t nk = g.k, wv = g.wv, ch = g.ch, cc = ch + 1, hw = g.h * g.w, row = g.row;
  const std::vector<T> gxs = normalised_columns<T>(g);
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, g.w * nk * ch));
  at::parallel_for(0, g.n * g.h, grain, [&](int64_t begin, int64_t end) {
    Scratch<T> tables(wv * kJ), sums((kColor ? kCp : 1) * wv * kV), block_t(kV * kV);
    const TableConstants<T> consts(g, 0);
    T* acc = sums.get();
    T* tr = block_t.get();
    T lanes[kV];
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.h, y = r % g.h;
      const T gy = normalised_row<T>(y, g.h);
      T* orow = op + n * ch * hw + y * g.w;  // channel c at orow + c * hw
      if (!kColor) {
        for (int64_t k = 0; k < nk; ++k) {
          const int64_t tap = n * nk + k;
          T* table = tables.get();
          fill_table<T, P, false>(A.maps[tap], gy, consts, wv, gxs.data(), A.weight[tap], table);
          const T* img = A.x + A.src[tap] * g.image;
          const T* img_below = img + row;  // the corners' row y0 + 1
          const auto taps_pixels = [&](auto first_tap) {
            constexpr bool kFirst = decltype(first_tap)::value;
            for_each_pixel<T>(table, kJ, g.w, [img, img_below, acc](const T* blk, int64_t lane, int64_t x) {
              const Int<T> o = offset_at(blk, lane);
              const V rows = at::vec::fmadd(V(at_slot(blk, kWy1, lane)), V::loadu(img_below + o),
                                            V(at_slot(blk, kWy0, lane)) * V::loadu(img + o));
              const V wx = V::template blend<kHigh>(V(at_slot(blk, kWx0, lane)), V(at_slot(blk, kWx1, lane)));
              T* a = acc + x * V::size();  // (GCC 12 does not see kV in this nested generic lambda)
              (kFirst ? wx * rows : at::vec::fmadd(wx, rows, V::loadu(a))).store(a);
            });
          };
          if (k == 0) {
            taps_pixels(std::true_type{});
          } else {
            taps_pixels(std::false_type{});
          }
        }
        // Fold and write: block by block, (pixel, lane) -> (lane, pixel).
        for (int64_t x = 0; x < g.w; x += kV) {
          at::vec::transpose_mxn<T, kV, kV>(acc + x * kV, kV, tr, kV);
          const int64_t count = std::min<int64_t>(kV, g.w - x);
          T* o = orow + x;
          if (count == kV) {
            for (int64_t c = 0; c < ch; ++c, o += hw) (V::loadu(tr + c * kV) + V::loadu(tr + (kCp + c) * kV)).store(o);
          } else {
            for (int64_t c = 0; c < ch; ++c, o += hw) {
              (V::loadu(tr + c * kV) + V::loadu(tr + (kCp + c) * kV)).store(o, count);
            }
          }
        }
      } else {
        // Colour map: the same, with one row of sums per output channel c, each
        // tap's sample mixed in by wt * row c of M (in both corners' lanes).
        T bias[kCp] = {};
        for (int64_t k = 0; k < nk; ++k) {
          const int64_t tap = n * nk + k;
          const T wt = A.weight[tap];
          const T* m = A.color + tap * ch * cc;
          V mix[kCp];
          for (int64_t c = 0; c < kCp; ++c) {
            for (int64_t l = 0; l < kV; ++l) {
              const int64_t j = l % kCp;
              lanes[l] = (c < ch && j < ch) ? wt * m[c * cc + j] : T(0);
            }
            mix[c] = V::loadu(lanes);
            if (c < ch) bias[c] += wt * m[c * cc + ch];
          }
          T* table = tables.get();
          fill_table<T, P, false>(A.maps[tap], gy, consts, wv, gxs.data(), T(1), table);
          const T* img = A.x + A.src[tap] * g.image;
          const T* img_below = img + row;
          const int64_t plane = wv * kV;  // channel c's sums at acc + c * plane
          const auto taps_pixels = [&](auto first_tap) {
            constexpr bool kFirst = decltype(first_tap)::value;
            for_each_pixel<T>(table, kJ, g.w, [&mix, img, img_below, acc, plane](const T* blk, int64_t lane, int64_t x) {
              const Int<T> o = offset_at(blk, lane);
              const V rows = at::vec::fmadd(V(at_slot(blk, kWy1, lane)), V::loadu(img_below + o),
                                            V(at_slot(blk, kWy0, lane)) * V::loadu(img + o));
              const V v = V::template blend<kHigh>(V(at_slot(blk, kWx0, lane)), V(at_slot(blk, kWx1, lane))) * rows;
              for (int64_t c = 0; c < V::size() / 2; ++c) {
                T* a = acc + c * plane + x * V::size();
                (kFirst ? mix[c] * v : at::vec::fmadd(mix[c], v, V::loadu(a))).store(a);
              }
            });
          };
          if (k == 0) {
            taps_pixels(std::true_type{});
          } else {
            taps_pixels(std::false_type{});
          }
        }
        // Per channel and block: (pixel, lane) -> (lane, pixel), then the sum over the lanes.
        for (int64_t x = 0; x < g.w; x += kV) {
          const int64_t count = std::min<int64_t>(kV, g.w - x);
          for (int64_t c = 0; c < ch; ++c) {
            at::vec::transpose_mxn<T, kV, kV>(acc + c * wv * kV + x * kV, kV, tr, kV);
            V out(bias[c]);
            for (int64_t l = 0; l < kV; ++l) out = out + V::loadu(tr + l * kV);
            out.store(orow + c * hw + x, count);
          }
        }
      }
    }
  });
}

// Scalar-load path (any channel count): the same tables, Cp = Ch.
template <typename T, Padding P, bool kColor>
void forward_scalar(const Args<T>& A, const Geometry& g, T* op) {
  constexpr int64_t kV = Vectorized<T>::size(), kJ = kForwardSlots;
  const int64_t nk = g.k, wv = g.wv, ch = g.ch, cc = ch + 1, cp = g.cp, hw = g.h * g.w;
  const std::vector<T> gxs = normalised_columns<T>(g);
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, g.w * nk * ch));
  at::parallel_for(0, g.n * g.h, grain, [&](int64_t begin, int64_t end) {
    Scratch<T> tables(nk * wv * kJ);
    const TableConstants<T> consts(g, 0);
    std::vector<const T*> images(nk);
    std::vector<T> acc(ch), v(ch), bias(ch);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = r / g.h, y = r % g.h;
      const T gy = normalised_row<T>(y, g.h);
      std::fill(bias.begin(), bias.end(), T(0));
      for (int64_t k = 0; k < nk; ++k) {
        const int64_t tap = n * nk + k;
        images[k] = A.x + A.src[tap] * g.image;
        fill_table<T, P, false>(A.maps[tap], gy, consts, wv, gxs.data(), kColor ? T(1) : A.weight[tap],
                                tables.get() + k * wv * kJ);
        if (kColor) {
          for (int64_t c = 0; c < ch; ++c) bias[c] += A.weight[tap] * A.color[(tap * ch + c) * cc + ch];
        }
      }
      T* orow = op + n * ch * hw + y * g.w;
      for (int64_t x = 0; x < g.w; ++x) {
        const int64_t boff = (x / kV) * kJ * kV, lane = x % kV;
        std::copy(bias.begin(), bias.end(), acc.begin());
        for (int64_t k = 0; k < nk; ++k) {
          const T* blk = tables.get() + k * wv * kJ + boff;
          const T* p = images[k] + offset_at(blk, lane);
          const T* q = p + g.row;
          const T wx0 = at_slot(blk, kWx0, lane), wx1 = at_slot(blk, kWx1, lane);
          const T wy0 = at_slot(blk, kWy0, lane), wy1 = at_slot(blk, kWy1, lane);
          for (int64_t j = 0; j < ch; ++j) v[j] = wx0 * (wy0 * p[j] + wy1 * q[j]) + wx1 * (wy0 * p[cp + j] + wy1 * q[cp + j]);
          if (!kColor) {
            for (int64_t c = 0; c < ch; ++c) acc[c] += v[c];
          } else {
            const int64_t tap = n * nk + k;
            const T wt = A.weight[tap];
            const T* m = A.color + tap * ch * cc;
            for (int64_t c = 0; c < ch; ++c) {
              T o = 0;
              for (int64_t j = 0; j < ch; ++j) o += m[c * cc + j] * v[j];
              acc[c] += wt * o;
            }
          }
        }
        for (int64_t c = 0; c < ch; ++c) orow[c * hw + x] = acc[c];
      }
    }
  });
}

// ------------------------------------------------------------------ backward

// grad_out, read through its strides: an expanded (out.sum()) or channels-last
// gradient needs no copy.
template <typename T>
struct GradView {
  const T* p;
  int64_t s0, s1, s2, s3;
};

// Per (tap, band of rows) sums, in this order, before the tap weight (and before
// the constant size / 2 of zeros padding): the 6 affine gradient terms, the
// weight gradient (without a colour bias's part), the colour matrix gradient
// (ch x ch) and the sum of grad_out per channel (the bias gradients, and the
// bias's part of the weight gradient).
inline int64_t slot_size(int64_t ch) { return 7 + ch * ch + ch; }

// What the backward computes: the gradient of x, and whether any tap gradient
// (affine and weight together; colour on its own) is needed.
struct Needs {
  bool x, sums, color;
};

// Rows of grad_out for a band of output rows, in the form the paths read.
//   pair path: per pixel the channels in both corners' lanes; with a colour map
//   instead each channel broadcast to a vector (Cp vectors per pixel);
//   scalar path: per pixel the channels.
// sum: per row, the sum of grad_out over the row, per channel.
template <typename T, bool kPair, bool kColor>
class GradRows {
 public:
  using V = Vectorized<T>;
  static constexpr int64_t kV = V::size(), kCp = kV / 2;
  // Vectors per pixel.
  static constexpr int64_t kPerPixel = kColor ? kCp : 1;

  GradRows(const Geometry& g, int64_t rows)
      : g_(g), per_row_(kPair ? g.wv * kPerPixel * kV : g.wv * g.ch), data_(rows * per_row_),
        plane_(kV * kV), tr_(kV * kV), sums_(rows * g.ch) {
    std::fill(plane_.get(), plane_.get() + kV * kV, T(0));  // rows of channels past ch stay 0
  }

  const T* row(int64_t i) { return data_.get() + i * per_row_; }
  const T* sum(int64_t i) const { return sums_.data() + i * g_.ch; }

  // count values of a row of grad_out with stride s3 (zeros past count).
  static V row_values(const T* s, int64_t s3, int64_t count) {
    if (s3 == 1) return V::loadu(s, count);
    if (s3 == 0) return V::set(V(0), V(*s), count);  // an expanded gradient (out.sum()): one value
    T lanes[kV] = {};
    for (int64_t i = 0; i < count; ++i) lanes[i] = s[i * s3];
    return V::loadu(lanes);
  }

  // Output row y of sample n into slot i.
  void load(const GradView<T>& G, int64_t n, int64_t y, int64_t i) {
    const int64_t ch = g_.ch;
    const T* src = G.p + n * G.s0 + y * G.s2;
    T* dst = data_.get() + i * per_row_;
    T* sum = sums_.data() + i * ch;
    if (!kPair) {
      for (int64_t c = 0; c < ch; ++c) sum[c] = 0;
      for (int64_t x = 0; x < g_.w; ++x) {
        for (int64_t c = 0; c < ch; ++c) {
          const T v = src[c * G.s1 + x * G.s3];
          dst[x * ch + c] = v;
          sum[c] += v;
        }
      }
      return;
    }
    V total[kCp];
    for (int64_t c = 0; c < kCp; ++c) total[c] = V(0);  // (only c < ch used)
    T* plane = plane_.get();
    T* tr = tr_.get();
    for (int64_t x = 0; x < g_.w; x += kV) {
      const int64_t count = std::min<int64_t>(kV, g_.w - x);
      // plane: row l holds channel l % Cp of the block's pixels (zeros past ch and past w).
      const bool whole = G.s3 == 1 && count == kV;  // the common case: contiguous, a whole block
#pragma GCC unroll 8
      for (int64_t c = 0; c < kCp; ++c) {  // unrolled: total[] stays in registers
        if (c >= ch) break;
        const T* s = src + c * G.s1 + x * G.s3;
        const V v = whole ? V::loadu(s) : row_values(s, G.s3, count);
        v.store(plane + c * kV);
        v.store(plane + (kCp + c) * kV);
        total[c] = total[c] + v;
      }
      if (!kColor) {
        // (lane, pixel) -> (pixel, lane): each pixel's pair vector.
        if (count == kV) {
          at::vec::transpose_mxn<T, kV, kV>(plane, kV, dst + x * kV, kV);
        } else {
          at::vec::transpose_mxn<T, kV, kV>(plane, kV, tr, kV);
          std::copy(tr, tr + count * kV, dst + x * kV);
        }
      } else {
        for (int64_t i = 0; i < count; ++i) {
          T* d = dst + (x + i) * kPerPixel * kV;
          for (int64_t c = 0; c < kCp; ++c) V(plane[c * kV + i]).store(d + c * kV);
        }
      }
    }
    for (int64_t c = 0; c < ch; ++c) sum[c] = at::vec::vec_reduce_all<T>([](V& a, V& b) { return a + b; }, total[c]);
  }

 private:
  Geometry g_;
  int64_t per_row_;
  Scratch<T> data_, plane_, tr_;
  std::vector<T> sums_;
};

// One tap's running sums over a band (vectors, one lane per pair lane), and the
// reduction of a band into the tap's slot.
template <typename T>
struct BandSums {
  using V = Vectorized<T>;
  static constexpr int64_t kCp = V::size() / 2;
  V x, xgy, xgx, y, ygy, ygx, w;  // sums of ex, ex gy, ex gx, ey, ey gy, ey gx, u . v
  V c[kCp];                       // colour: sums of g_c * v_j, channel j in lanes j and Cp + j
  BandSums() : x(0), xgy(0), xgx(0), y(0), ygy(0), ygx(0), w(0) {
    for (int64_t i = 0; i < kCp; ++i) c[i] = V(0);
  }
  // The x sums' corner x0 lanes count negatively: d v / d ix = v(x0 + 1) - v(x0).
  void into(at::acc_type<T, false>* slot, int64_t ch, bool color) const {
    const auto sum = [](V& a, V& b) { return a + b; };
    T lanes[V::size()];
    for (int64_t l = 0; l < V::size(); ++l) lanes[l] = l < kCp ? T(-1) : T(1);
    const V sign = V::loadu(lanes);
    slot[0] += at::vec::vec_reduce_all<T>(sum, xgx * sign);
    slot[1] += at::vec::vec_reduce_all<T>(sum, xgy * sign);
    slot[2] += at::vec::vec_reduce_all<T>(sum, x * sign);
    slot[3] += at::vec::vec_reduce_all<T>(sum, ygx);
    slot[4] += at::vec::vec_reduce_all<T>(sum, ygy);
    slot[5] += at::vec::vec_reduce_all<T>(sum, y);
    slot[6] += at::vec::vec_reduce_all<T>(sum, w);
    if (color) {
      for (int64_t i = 0; i < ch; ++i) {
        c[i].store(lanes);
        for (int64_t j = 0; j < ch; ++j) slot[7 + i * ch + j] += lanes[j] + lanes[kCp + j];
      }
    }
  }
};

// The pair path's backward for one tap and one output row: adds the row to the
// band's sums (kSums), and (kScatter) the gradient of the tap's source image.
//   r0, r1: the corners' pair vectors of rows y0 and y0 + 1; rows = r0 + wy1 (r1 - r0),
//   the sample v = wx . rows; u: the gradient reaching v (M^T grad_out with a colour map);
//   u . v (weight) = sum wx . (u rows); u . dv/dix = sum signed(u rows), the sign
//   per lane applied once per band (BandSums::into); u . dv/diy = sum (wx u) . (r1 - r0).
template <typename T, Padding P, bool kColor, bool kSums, bool kScatter>
void backward_pair_row(const Geometry& g, const T* table, T gy, const T* img, T wt, const Vectorized<T>* mix_t,
                       const T* grow, bool color_sums, T* gimg, BandSums<T>& bs) {
  using V = Vectorized<T>;
  constexpr int64_t kV = V::size(), kCp = kV / 2, kJ = kBackwardSlots;
  constexpr int64_t kPerPixel = GradRows<T, true, kColor>::kPerPixel;
  constexpr int64_t kHigh = ((int64_t(1) << kV) - 1) & ~((int64_t(1) << kCp) - 1);
  const int64_t row = g.row;
  const T* img_below = img + row;
  T* gimg_below = gimg + row;
  V rx(0), rxg(0), ry(0), ryg(0), rw(0);  // this row's sums
  const V vwt(wt);
  for_each_pixel<T>(table, kJ, g.w, [&](const T* blk, int64_t lane, int64_t x) {
    const Int<T> o = offset_at(blk, lane);
    const V r0 = V::loadu(img + o);
    const V d = V::loadu(img_below + o) - r0;
    const V vwy1(at_slot(blk, kWy1, lane));
    const V rows = at::vec::fmadd(vwy1, d, r0);
    const V wx = V::template blend<kHigh>(V(at_slot(blk, kWx0, lane)), V(at_slot(blk, kWx1, lane)));
    const T* gp = grow + x * kPerPixel * kV;
    V u;
    if (kColor) {
      u = mix_t[0] * V::loadu(gp);
      for (int64_t c = 1; c < kCp; ++c) u = at::vec::fmadd(mix_t[c], V::loadu(gp + c * kV), u);
    } else {
      u = V::loadu(gp);
    }
    const V ux = wx * u;
    if (kSums) {
      V ex = u * rows, ey = ux * d;
      rw = at::vec::fmadd(wx, ex, rw);
      if (P != kZeros) {
        ex = ex * V(at_slot(blk, kDix, lane));
        ey = ey * V(at_slot(blk, kDiy, lane));
      }
      const V vgx(at_slot(blk, kGx, lane));
      rx = rx + ex;
      rxg = at::vec::fmadd(vgx, ex, rxg);
      ry = ry + ey;
      ryg = at::vec::fmadd(vgx, ey, ryg);
      if (kColor && color_sums) {
        const V v = wx * rows;
        for (int64_t c = 0; c < kCp; ++c) bs.c[c] = at::vec::fmadd(V::loadu(gp + c * kV), v, bs.c[c]);
      }
    }
    if (kScatter) {
      // This work item owns the image: the corners' pair vectors are read, added to and
      // written back, in the buffer of x0's parity (see backward_kernel).
      const V s = ux * vwt;
      const Int<T> so = reinterpret_cast<const Int<T>*>(blk + kScatterOff * kV)[lane];
      at::vec::fmadd(V(at_slot(blk, kWy0, lane)), s, V::loadu(gimg + so)).store(gimg + so);
      at::vec::fmadd(vwy1, s, V::loadu(gimg_below + so)).store(gimg_below + so);
    }
  });
  if (!kSums) return;
  const V vgy(gy);
  bs.x = bs.x + rx;
  bs.xgy = at::vec::fmadd(vgy, rx, bs.xgy);
  bs.xgx = bs.xgx + rxg;
  bs.y = bs.y + ry;
  bs.ygy = at::vec::fmadd(vgy, ry, bs.ygy);
  bs.ygx = bs.ygx + ryg;
  bs.w = bs.w + rw;
}

// The scalar-load path's backward for one tap and one output row (as
// backward_pair_row; the row's sums in T, added to the tap's slot in Acc).
template <typename T, Padding P, bool kColor, bool kScatter>
void backward_scalar_row(const Geometry& g, const T* table, T gy, const T* img, T wt, const T* m, const T* grow,
                         const Needs& needs, T* gimg, at::acc_type<T, false>* slot, std::vector<T>& work) {
  using Acc = at::acc_type<T, false>;
  constexpr int64_t kJ = kBackwardSlots;
  const int64_t ch = g.ch, cc = ch + 1, cp = g.cp;
  T* u = work.data();  // ch
  T* sc = u + ch;      // ch * ch: colour sums of the row
  std::fill(sc, sc + ch * ch, T(0));
  T sx = 0, sxg = 0, sy = 0, syg = 0, sw = 0;
  for_each_pixel<T>(table, kJ, g.w, [&](const T* blk, int64_t lane, int64_t x) {
    const T* p = img + offset_at(blk, lane);
    const T* q = p + g.row;
    const T wx0 = at_slot(blk, kWx0, lane), wx1 = at_slot(blk, kWx1, lane);
    const T wy0 = at_slot(blk, kWy0, lane), wy1 = at_slot(blk, kWy1, lane);
    const T* gc = grow + x * ch;
    for (int64_t j = 0; j < ch; ++j) {
      if (kColor) {
        T s = 0;
        for (int64_t c = 0; c < ch; ++c) s = std::fma(gc[c], m[c * cc + j], s);
        u[j] = s;
      } else {
        u[j] = gc[j];
      }
    }
    if (needs.sums) {
      // Every product that meets a sum is an explicit fma: the compiler may fuse a * b + c (-ffp-contract=fast,
      // GCC's default) differently in this function's two instances (with and without the scatter), and the
      // sums must be the same bits in both (the layouts with and without dx).
      T ex = 0, ey = 0;
      for (int64_t j = 0; j < ch; ++j) {
        const T c00 = p[j], c01 = p[cp + j], c10 = q[j], c11 = q[cp + j];
        const T v = std::fma(wx0, std::fma(wy0, c00, wy1 * c10), wx1 * std::fma(wy0, c01, wy1 * c11));
        sw = std::fma(u[j], v, sw);
        ex = std::fma(u[j], std::fma(wy0, c01 - c00, wy1 * (c11 - c10)), ex);
        ey = std::fma(u[j], std::fma(wx0, c10 - c00, wx1 * (c11 - c01)), ey);
        if (kColor && needs.color) {
          for (int64_t c = 0; c < ch; ++c) sc[c * ch + j] = std::fma(gc[c], v, sc[c * ch + j]);
        }
      }
      if (P != kZeros) {
        ex *= at_slot(blk, kDix, lane);
        ey *= at_slot(blk, kDiy, lane);
      }
      const T gx = at_slot(blk, kGx, lane);
      sx += ex;
      sxg = std::fma(ex, gx, sxg);
      sy += ey;
      syg = std::fma(ey, gx, syg);
    }
    if (kScatter) {
      T* q0 = gimg + offset_at(blk, lane);
      T* q1 = q0 + g.row;
      for (int64_t j = 0; j < ch; ++j) {
        const T s = wt * u[j];
        q0[j] += s * wy0 * wx0;
        q0[cp + j] += s * wy0 * wx1;
        q1[j] += s * wy1 * wx0;
        q1[cp + j] += s * wy1 * wx1;
      }
    }
  });
  if (!needs.sums) return;
  slot[0] += sxg;
  slot[1] = std::fma(static_cast<Acc>(sx), static_cast<Acc>(gy), slot[1]);
  slot[2] += sx;
  slot[3] += syg;
  slot[4] = std::fma(static_cast<Acc>(sy), static_cast<Acc>(gy), slot[4]);
  slot[5] += sy;
  slot[6] += sw;
  if (kColor && needs.color) {
    for (int64_t e = 0; e < ch * ch; ++e) slot[7 + e] += sc[e];
  }
}

// The backward of either path. Work items, slots and the final reduction are
// described in the header; nothing here depends on the number of threads.
template <typename T, Padding P, bool kColor, bool kPair>
void backward_kernel(const Args<T>& A, const GradView<T>& G, const Geometry& g, const Needs& needs,
                     const std::vector<int64_t>& start, const std::vector<int64_t>& order, T* gxp, T* gap, T* gcp,
                     T* gwp) {
  using V = Vectorized<T>;
  using Acc = at::acc_type<T, false>;
  constexpr int64_t kV = V::size(), kCp = kV / 2, kJ = kBackwardSlots;
  const int64_t nk = g.k, ch = g.ch, cc = ch + 1, taps = g.n * nk;
  const std::vector<T> gxs = normalised_columns<T>(g);
  // Bands of about 256 output pixels: float sums over a band, double sums of the bands.
  const int64_t band = std::min<int64_t>(g.h, std::max<int64_t>(1, 256 / g.w));
  const int64_t bands = (g.h + band - 1) / band, ss = slot_size(ch);
  std::vector<Acc> slots(taps * bands * ss, Acc(0));

  // Per work item: one tap row's table, a band of grad_out rows, colour scratch.
  struct Work {
    Scratch<T> table;
    GradRows<T, kPair, kColor> grad;
    std::vector<V> mix_t;
    std::vector<T> scalar;  // scalar path: u and the row's colour sums
    std::vector<Acc> gsum;  // the band's sum of grad_out per channel
    Work(const Geometry& g, int64_t band)
        : table(g.wv * kJ), grad(g, band), mix_t(kColor ? kCp : 0), scalar(g.ch + g.ch * g.ch), gsum(g.ch) {}
  };
  // Tap `tap` over the rows of band bb (their grad rows loaded), into its slot.
  const auto tap_band = [&](Work& w, int64_t tap, int64_t bb, T* gimg, auto scatter) {
    constexpr bool kScatter = decltype(scatter)::value;
    const T* img = A.x + A.src[tap] * g.image;
    const T* m = kColor ? A.color + tap * ch * cc : nullptr;
    const T wt = A.weight[tap];
    if (kPair && kColor) {
      T lanes[kV];
      for (int64_t c = 0; c < kCp; ++c) {
        for (int64_t l = 0; l < kV; ++l) {
          const int64_t j = l % kCp;
          lanes[l] = (c < ch && j < ch) ? m[c * cc + j] : T(0);
        }
        w.mix_t[c] = V::loadu(lanes);
      }
    }
    BandSums<T> bs;
    Acc* slot = slots.data() + (tap * bands + bb) * ss;
    const bool color_sums = kColor && needs.color;
    const int64_t y0 = bb * band, y1 = std::min(g.h, y0 + band);
    const TableConstants<T> consts(g, g.b * g.image);
    for (int64_t y = y0; y < y1; ++y) {
      const T gy = normalised_row<T>(y, g.h);
      fill_table<T, P, true>(A.maps[tap], gy, consts, g.wv, gxs.data(), T(1), w.table.get(), kPair && kScatter);
      if (kPair) {
        if (needs.sums) {
          backward_pair_row<T, P, kColor, true, kScatter>(g, w.table.get(), gy, img, wt, w.mix_t.data(),
                                                          w.grad.row(y - y0), color_sums, gimg, bs);
        } else {
          backward_pair_row<T, P, kColor, false, kScatter>(g, w.table.get(), gy, img, wt, w.mix_t.data(),
                                                           w.grad.row(y - y0), color_sums, gimg, bs);
        }
      } else {
        backward_scalar_row<T, P, kColor, kScatter>(g, w.table.get(), gy, img, wt, m, w.grad.row(y - y0), needs,
                                                    gimg, slot, w.scalar);
      }
    }
    if (!needs.sums) return;
    if (kPair) bs.into(slot, ch, color_sums);
    for (int64_t c = 0; c < ch; ++c) slot[7 + ch * ch + c] += w.gsum[c];
  };
  const auto load_band = [&](Work& w, int64_t n, int64_t bb) {
    const int64_t y0 = bb * band, y1 = std::min(g.h, y0 + band);
    std::fill(w.gsum.begin(), w.gsum.end(), Acc(0));
    for (int64_t y = y0; y < y1; ++y) {
      w.grad.load(G, n, y, y - y0);
      const T* s = w.grad.sum(y - y0);
      for (int64_t c = 0; c < ch; ++c) w.gsum[c] += s[c];
    }
  };

  if (needs.x) {
    // One item per source image b: every tap reading b, in (n, k) order; the taps
    // of one output row share each loaded band of grad_out.
    at::parallel_for(0, g.b, 1, [&](int64_t b_begin, int64_t b_end) {
      Work w(g, band);
      for (int64_t b = b_begin; b < b_end; ++b) {
        T* gimg = gxp + b * g.image;
        for (int64_t i = start[b]; i < start[b + 1];) {
          const int64_t n = order[i] / nk;
          int64_t last = i + 1;
          while (last < start[b + 1] && order[last] / nk == n) ++last;
          for (int64_t bb = 0; bb < bands; ++bb) {
            load_band(w, n, bb);
            for (int64_t j = i; j < last; ++j) tap_band(w, order[j], bb, gimg, std::true_type{});
          }
          i = last;
        }
      }
    });
  } else if (needs.sums) {
    // One item per (output row n, band).
    at::parallel_for(0, g.n * bands, 1, [&](int64_t begin, int64_t end) {
      Work w(g, band);
      for (int64_t item = begin; item < end; ++item) {
        const int64_t n = item / bands, bb = item % bands;
        load_band(w, n, bb);
        for (int64_t k = 0; k < nk; ++k) tap_band(w, n * nk + k, bb, nullptr, std::false_type{});
      }
    });
  }
  if (!needs.sums) return;

  // Each tap's slots, added in band order; then the tap weight and the constants.
  const Acc kx = P == kZeros ? Acc(0.5) * g.w : Acc(1), ky = P == kZeros ? Acc(0.5) * g.h : Acc(1);
  std::vector<Acc> total(ss);
  for (int64_t tap = 0; tap < taps; ++tap) {
    std::fill(total.begin(), total.end(), Acc(0));
    for (int64_t bb = 0; bb < bands; ++bb) {
      const Acc* slot = slots.data() + (tap * bands + bb) * ss;
      for (int64_t e = 0; e < ss; ++e) total[e] += slot[e];
    }
    const Acc wt = A.weight[tap];
    for (int e = 0; e < 3; ++e) gap[tap * 6 + e] = static_cast<T>(wt * kx * total[e]);
    for (int e = 3; e < 6; ++e) gap[tap * 6 + e] = static_cast<T>(wt * ky * total[e]);
    const Acc* gsum = total.data() + 7 + ch * ch;
    Acc gw = total[6];
    if (kColor) {
      const T* m = A.color + tap * ch * cc;
      for (int64_t c = 0; c < ch; ++c) gw += static_cast<Acc>(m[c * cc + ch]) * gsum[c];
      if (needs.color) {
        T* gc = gcp + tap * ch * cc;
        for (int64_t c = 0; c < ch; ++c) {
          for (int64_t j = 0; j < ch; ++j) gc[c * cc + j] = static_cast<T>(wt * total[7 + c * ch + j]);
          gc[c * cc + ch] = static_cast<T>(wt * gsum[c]);
        }
      }
    }
    gwp[tap] = static_cast<T>(gw);
  }
}

// ------------------------------------------------------------------ dispatch

// Compile-time cases: padding mode, colour map or none, and the path (pair or
// scalar loads, from the channel count).
#define AUGNET_BY_PADDING(KERNEL, T, COLOR, PAIR, ...) \
  switch (padding) {                                   \
    case kZeros:                                       \
      KERNEL<T, kZeros, COLOR, PAIR>(__VA_ARGS__);     \
      break;                                           \
    case kBorder:                                      \
      KERNEL<T, kBorder, COLOR, PAIR>(__VA_ARGS__);    \
      break;                                           \
    default:                                           \
      KERNEL<T, kReflection, COLOR, PAIR>(__VA_ARGS__); \
  }

#define AUGNET_BY_CASE(KERNEL, T, ...)                            \
  if (use_color) {                                                \
    if (pair) {                                                   \
      AUGNET_BY_PADDING(KERNEL, T, true, true, __VA_ARGS__)       \
    } else {                                                      \
      AUGNET_BY_PADDING(KERNEL, T, true, false, __VA_ARGS__)      \
    }                                                             \
  } else {                                                        \
    if (pair) {                                                   \
      AUGNET_BY_PADDING(KERNEL, T, false, true, __VA_ARGS__)      \
    } else {                                                      \
      AUGNET_BY_PADDING(KERNEL, T, false, false, __VA_ARGS__)     \
    }                                                             \
  }

template <typename T, Padding P, bool kColor, bool kPair>
void forward_kernel(const Args<T>& A, const Geometry& g, T* op) {
  if (kPair) {
    forward_pair<T, P, kColor>(A, g, op);
  } else {
    forward_scalar<T, P, kColor>(A, g, op);
  }
}

at::Tensor tap_mix_cpu(const at::Tensor& x_in, const at::Tensor& src_in, const at::Tensor& affine_in,
                       const c10::optional<at::Tensor>& color_in, const at::Tensor& weight_in,
                       c10::string_view padding_name) {
  Shape s;
  check_inputs(x_in, src_in, affine_in, color_in, weight_in, &s);
  const Padding padding = parse_padding(padding_name);
  auto out = at::empty({s.n, s.ch, s.h, s.w}, x_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (out.numel() == 0) return out;
  const auto src = src_in.contiguous();
  const auto affine = affine_in.contiguous();
  const auto weight = weight_in.contiguous();
  const bool use_color = has_color(color_in);
  const auto color = use_color ? color_in->contiguous() : at::Tensor();

  AT_DISPATCH_FLOATING_TYPES(x_in.scalar_type(), "tap_mix_cpu", [&] {
    const bool pair = pair_path<scalar_t>(s.ch);
    const Geometry g = make_geometry<scalar_t>(s, pair);
    const auto xp = padded_images<scalar_t>(x_in, g);
    const auto maps = tap_maps<scalar_t>(affine.data_ptr<scalar_t>(), s.n * s.k);
    const Args<scalar_t> A{xp.data_ptr<scalar_t>(), src.data_ptr<int64_t>(), maps.data(),
                           use_color ? color.data_ptr<scalar_t>() : nullptr, weight.data_ptr<scalar_t>()};
    AUGNET_BY_CASE(forward_kernel, scalar_t, A, g, out.data_ptr<scalar_t>())
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
  const auto src = src_in.contiguous();
  const auto affine = affine_in.contiguous();
  const auto weight = weight_in.contiguous();
  const bool use_color = has_color(color_in);
  const auto color = use_color ? color_in->contiguous() : at::Tensor();

  // Gradients not asked for are zeros of the right shape, and not computed.
  const auto zeros_like_x = [&] { return at::zeros({s.b, s.ch, s.h, s.w}, x_in.options()); };
  auto grad_affine = at::zeros_like(affine);
  auto grad_color = use_color ? at::zeros_like(color) : at::empty({0}, x_in.options());
  auto grad_weight = at::zeros_like(weight);
  const Needs needs{output_mask[0], output_mask[1] || output_mask[3] || (use_color && output_mask[2]),
                    use_color && output_mask[2]};
  if (s.n == 0 || s.b * s.ch * s.h * s.w == 0 || (!needs.x && !needs.sums)) {
    return {zeros_like_x(), grad_affine, grad_color, grad_weight};
  }

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

  at::Tensor grad_x;
  AT_DISPATCH_FLOATING_TYPES(x_in.scalar_type(), "tap_mix_backward_cpu", [&] {
    const bool pair = pair_path<scalar_t>(s.ch);
    const Geometry g = make_geometry<scalar_t>(s, pair);
    const auto xp = padded_images<scalar_t>(x_in, g);
    // The gradient of x in the padded layout (what lands in the border is dropped); the
    // pair path scatters into two such sets of images, by the parity of each sample's x0,
    // so that the read-modify-writes of neighbouring pixels never partly overlap (a
    // partly overlapping load cannot take its value from the pending store: it stalls).
    const auto gxp = needs.x ? at::zeros({(pair ? 2 : 1) * g.b * g.image + 64}, xp.options()) : at::Tensor();
    const auto maps = tap_maps<scalar_t>(affine.data_ptr<scalar_t>(), s.n * s.k);
    const Args<scalar_t> A{xp.data_ptr<scalar_t>(), src.data_ptr<int64_t>(), maps.data(),
                           use_color ? color.data_ptr<scalar_t>() : nullptr, weight.data_ptr<scalar_t>()};
    const GradView<scalar_t> G{grad_in.data_ptr<scalar_t>(), grad_in.stride(0), grad_in.stride(1),
                               grad_in.stride(2), grad_in.stride(3)};
    AUGNET_BY_CASE(backward_kernel, scalar_t, A, G, g, needs, start, order,
                   needs.x ? gxp.data_ptr<scalar_t>() : nullptr, grad_affine.data_ptr<scalar_t>(),
                   use_color ? grad_color.data_ptr<scalar_t>() : nullptr, grad_weight.data_ptr<scalar_t>())
    if (needs.x && pair) {
      grad_x = unpacked_gradient<scalar_t>(gxp, g);
    } else {
      grad_x = zeros_like_x();
      if (needs.x) grad_x.copy_(interior(gxp, g).permute({0, 3, 1, 2}));
    }
  });
  return {grad_x, grad_affine, grad_color, grad_weight};
}

}  // namespace

TORCH_LIBRARY(augnet, m) {
  m.def("tap_mix(Tensor x, Tensor src, Tensor affine, Tensor? color, Tensor weight, str padding) -> Tensor");
  m.def(
      "tap_mix_backward(Tensor grad_out, Tensor x, Tensor src, Tensor affine, Tensor? color, Tensor weight, "
      "str padding, bool[4] output_mask) -> (Tensor, Tensor, Tensor, Tensor)");
  // The CUDA kernels' bad-input flag (augnet/ops/bad_input.py): an int32 tensor on a device, kept alive by
  // Python, whose address the kernels on that device OR their findings into. Implemented for CUDA only.
  m.def("_set_bad_input_flag(Tensor flag) -> ()");
}

TORCH_LIBRARY_IMPL(augnet, CPU, m) {
  m.impl("tap_mix", &tap_mix_cpu);
  m.impl("tap_mix_backward", &tap_mix_backward_cpu);
}

}  // namespace augnet

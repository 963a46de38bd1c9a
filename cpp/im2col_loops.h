// im2col / col2im loops (no Python dependency, so they can be benchmarked on their own).
//
// Layout: x is (N, C, H, W); cols is (N*OH*OW, C*kh*kw) with rows ordered (n, oh, ow) and
// columns ordered (c, i, j); zero padding ph/pw, dilation dh/dw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace mtd {
namespace im2col_detail {

struct Geometry {
    std::int64_t N, C, H, W;
    std::int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    std::int64_t OH, OW;

    std::int64_t rows() const { return N * OH * OW; }
    std::int64_t row_len() const { return C * kh * kw; }
};

// Output columns ow in [lo, hi) read only in-bounds pixels for every kernel tap along W.
inline void interior_columns(const Geometry& g, std::int64_t& lo, std::int64_t& hi) {
    lo = (g.pw + g.sw - 1) / g.sw;
    const std::int64_t last = g.W - 1 - (g.kw - 1) * g.dw + g.pw;  // largest valid ow*sw
    hi = last < 0 ? 0 : std::min(g.OW, last / g.sw + 1);
    if (hi < lo) hi = lo = std::min(lo, g.OW);
}

// Kernel taps k in [lo, hi) land inside [0, size) for the coordinate start + k * step.
inline void valid_taps(std::int64_t start, std::int64_t step, std::int64_t taps,
                       std::int64_t size, std::int64_t& lo, std::int64_t& hi) {
    lo = 0;
    while (lo < taps && start + lo * step < 0) ++lo;
    hi = taps;
    while (hi > lo && start + (hi - 1) * step >= size) --hi;
}

// Copies the kw taps of an image row that start at column w0, `dw` apart, into dst;
// taps outside the row read as zero padding.
template <typename T>
void unfold_taps(T* dst, const T* row, std::int64_t w0, const Geometry& g) {
    for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t w = w0 + j * g.dw;
        dst[j] = (w >= 0 && w < g.W) ? row[w] : T(0);
    }
}

// Adjoint of unfold_taps.
template <typename T>
void fold_taps(T* row, const T* src, std::int64_t w0, const Geometry& g) {
    for (std::int64_t j = 0; j < g.kw; ++j) {
        const std::int64_t w = w0 + j * g.dw;
        if (w >= 0 && w < g.W) row[w] += src[j];
    }
}

// Fast path for a window that lies inside the image (dw == 1): C*kh contiguous runs of KW
// values, KW a compile-time constant so each run is a couple of moves. Returns the advanced dst.
template <int KW, typename T>
T* unfold_window(const T* window, T* dst, const Geometry& g) {
    const std::int64_t C = g.C, kh = g.kh, kw = KW ? KW : g.kw;
    const std::int64_t plane = g.H * g.W, step = g.dh * g.W;
    for (std::int64_t c = 0; c < C; ++c) {
        const T* src = window + c * plane;
        for (std::int64_t i = 0; i < kh; ++i, dst += kw, src += step)
            for (std::int64_t j = 0; j < kw; ++j) dst[j] = src[j];
    }
    return dst;
}

// Adjoint of unfold_window. Returns the advanced src.
template <int KW, typename T>
const T* fold_window(const T* src, T* window, const Geometry& g) {
    const std::int64_t C = g.C, kh = g.kh, kw = KW ? KW : g.kw;
    const std::int64_t plane = g.H * g.W, step = g.dh * g.W;
    for (std::int64_t c = 0; c < C; ++c) {
        T* dst = window + c * plane;
        for (std::int64_t i = 0; i < kh; ++i, src += kw, dst += step)
            for (std::int64_t j = 0; j < kw; ++j) dst[j] += src[j];
    }
    return src;
}

// General window (any dilation, may overlap the padding) of output pixel (n, oh, ow), whose
// kernel rows i in [ilo, ihi) are inside the image. Returns the advanced dst.
template <typename T>
T* unfold_general(const T* x, T* dst, const Geometry& g, std::int64_t n, std::int64_t oh,
                  std::int64_t ow, std::int64_t ilo, std::int64_t ihi) {
    const std::int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    for (std::int64_t c = 0; c < g.C; ++c) {
        const T* xc = x + (n * g.C + c) * g.H * g.W;
        for (std::int64_t i = 0; i < g.kh; ++i, dst += g.kw) {
            if (i < ilo || i >= ihi)
                std::fill(dst, dst + g.kw, T(0));
            else
                unfold_taps(dst, xc + (h0 + i * g.dh) * g.W, w0, g);
        }
    }
    return dst;
}

// Adjoint of unfold_general. Returns the advanced src.
template <typename T>
const T* fold_general(const T* src, T* x, const Geometry& g, std::int64_t n, std::int64_t oh,
                      std::int64_t ow, std::int64_t ilo, std::int64_t ihi) {
    const std::int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    for (std::int64_t c = 0; c < g.C; ++c) {
        T* xc = x + (n * g.C + c) * g.H * g.W;
        for (std::int64_t i = 0; i < g.kh; ++i, src += g.kw)
            if (i >= ilo && i < ihi) fold_taps(xc + (h0 + i * g.dh) * g.W, src, w0, g);
    }
    return src;
}

// cols rows are written strictly front to back: the write stream is the cost (measured
// faster than blocked orders) and the small image stays in cache. Output pixels whose window
// lies inside the image (columns [lo, hi) of a row with no vertical padding, dw == 1) take
// the branch-free fast path; the rest (borders, dilated columns) the general one.
template <int KW, typename T>
void im2col_loop(const T* x, T* cols, const Geometry& g) {
    std::int64_t lo, hi;
    interior_columns(g, lo, hi);
    if (g.dw != 1) lo = hi = 0;
    T* dst = cols;
    for (std::int64_t n = 0; n < g.N; ++n) {
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
            const std::int64_t h0 = oh * g.sh - g.ph;
            std::int64_t ilo, ihi;
            valid_taps(h0, g.dh, g.kh, g.H, ilo, ihi);
            const bool full_height = ilo == 0 && ihi == g.kh;
            const std::int64_t fast_lo = full_height ? lo : 0, fast_hi = full_height ? hi : 0;
            for (std::int64_t ow = 0; ow < fast_lo; ++ow)
                dst = unfold_general(x, dst, g, n, oh, ow, ilo, ihi);
            const std::int64_t origin = n * g.C * g.H * g.W + h0 * g.W - g.pw;  // at ow = 0
            for (std::int64_t ow = fast_lo; ow < fast_hi; ++ow)
                dst = unfold_window<KW>(x + (origin + ow * g.sw), dst, g);
            for (std::int64_t ow = std::max(fast_lo, fast_hi); ow < g.OW; ++ow)
                dst = unfold_general(x, dst, g, n, oh, ow, ilo, ihi);
        }
    }
}

// Adjoint of im2col_loop: reads cols front to back and accumulates into the image.
template <int KW, typename T>
void col2im_loop(const T* cols, T* x, const Geometry& g) {
    std::fill(x, x + g.N * g.C * g.H * g.W, T(0));
    std::int64_t lo, hi;
    interior_columns(g, lo, hi);
    if (g.dw != 1) lo = hi = 0;
    const T* src = cols;
    for (std::int64_t n = 0; n < g.N; ++n) {
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
            const std::int64_t h0 = oh * g.sh - g.ph;
            std::int64_t ilo, ihi;
            valid_taps(h0, g.dh, g.kh, g.H, ilo, ihi);
            const bool full_height = ilo == 0 && ihi == g.kh;
            const std::int64_t fast_lo = full_height ? lo : 0, fast_hi = full_height ? hi : 0;
            for (std::int64_t ow = 0; ow < fast_lo; ++ow)
                src = fold_general(src, x, g, n, oh, ow, ilo, ihi);
            const std::int64_t origin = n * g.C * g.H * g.W + h0 * g.W - g.pw;
            for (std::int64_t ow = fast_lo; ow < fast_hi; ++ow)
                src = fold_window<KW>(src, x + (origin + ow * g.sw), g);
            for (std::int64_t ow = std::max(fast_lo, fast_hi); ow < g.OW; ++ow)
                src = fold_general(src, x, g, n, oh, ow, ilo, ihi);
        }
    }
}

// Picks a compile-time kernel width for the common sizes, else the runtime loop.
template <typename Fn>
void dispatch_kw(std::int64_t kw, Fn&& fn) {
    switch (kw) {
        case 1: return fn(std::integral_constant<int, 1>{});
        case 2: return fn(std::integral_constant<int, 2>{});
        case 3: return fn(std::integral_constant<int, 3>{});
        case 4: return fn(std::integral_constant<int, 4>{});
        case 5: return fn(std::integral_constant<int, 5>{});
        case 7: return fn(std::integral_constant<int, 7>{});
        default: return fn(std::integral_constant<int, 0>{});
    }
}

// x (N, C, H, W) -> cols (N*OH*OW, C*kh*kw).
template <typename T>
void unfold_image(const T* x, T* cols, const Geometry& g) {
    dispatch_kw(g.kw, [&](auto kw) { im2col_loop<decltype(kw)::value>(x, cols, g); });
}

// cols -> x, overwriting x with the sum of the contributions to each pixel.
template <typename T>
void fold_image(const T* cols, T* x, const Geometry& g) {
    dispatch_kw(g.kw, [&](auto kw) { col2im_loop<decltype(kw)::value>(cols, x, g); });
}

}  // namespace im2col_detail
}  // namespace mtd

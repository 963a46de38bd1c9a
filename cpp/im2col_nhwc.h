// im2col / col2im for channels-last (NHWC) images.
//
// Layout: x is (N, H, W, C) memory; cols is (N*OH*OW, kh*kw*C) with rows ordered
// (n, oh, ow) and columns ordered (i, j, c). Every copied run is C contiguous values (kw*C
// when the kernel row lies inside the image and taps are adjacent), so both directions are
// memcpy-like passes that the compiler vectorises, where the NCHW kernels move kw values at
// a time. Zero padding is handled in the loop: no padded copy of the image is made.
// Images are independent, so the work is split over images between worker threads; each
// image's sums are made in one fixed order, whatever the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "im2col_loops.h"

namespace mtd {
namespace nhwc_detail {

using im2col_detail::Geometry;

// Unfolds images [n0, n1) into their rows of cols.
template <typename T>
void unfold(const T* x, T* cols, const Geometry& g, std::int64_t n0, std::int64_t n1) {
    const std::int64_t C = g.C, run = g.kw * C, row_len = g.kh * run;
    for (std::int64_t n = n0; n < n1; ++n) {
        const T* image = x + n * g.H * g.W * C;
        T* dst = cols + n * g.OH * g.OW * row_len;
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
            for (std::int64_t ow = 0; ow < g.OW; ++ow, dst += row_len) {
                const std::int64_t w0 = ow * g.sw - g.pw;
                const bool whole_row = g.dw == 1 && w0 >= 0 && w0 + g.kw <= g.W;
                T* d = dst;
                for (std::int64_t i = 0; i < g.kh; ++i, d += run) {
                    const std::int64_t h = oh * g.sh - g.ph + i * g.dh;
                    if (h < 0 || h >= g.H) {
                        std::fill(d, d + run, T(0));
                        continue;
                    }
                    const T* src = image + (h * g.W) * C;
                    if (whole_row) {
                        std::memcpy(d, src + w0 * C, sizeof(T) * run);
                        continue;
                    }
                    for (std::int64_t j = 0; j < g.kw; ++j) {
                        const std::int64_t w = w0 + j * g.dw;
                        if (w < 0 || w >= g.W)
                            std::fill(d + j * C, d + (j + 1) * C, T(0));
                        else
                            std::memcpy(d + j * C, src + w * C, sizeof(T) * C);
                    }
                }
            }
        }
    }
}

template <typename T>
inline void add_run(T* __restrict dst, const T* __restrict src, std::int64_t len) {
    for (std::int64_t k = 0; k < len; ++k) dst[k] += src[k];
}

// Folds the rows of images [n0, n1) back into x (overwritten with the sums).
template <typename T>
void fold(const T* cols, T* x, const Geometry& g, std::int64_t n0, std::int64_t n1) {
    const std::int64_t C = g.C, run = g.kw * C, row_len = g.kh * run;
    std::fill(x + n0 * g.H * g.W * C, x + n1 * g.H * g.W * C, T(0));
    for (std::int64_t n = n0; n < n1; ++n) {
        T* image = x + n * g.H * g.W * C;
        const T* src = cols + n * g.OH * g.OW * row_len;
        for (std::int64_t oh = 0; oh < g.OH; ++oh) {
            for (std::int64_t ow = 0; ow < g.OW; ++ow, src += row_len) {
                const std::int64_t w0 = ow * g.sw - g.pw;
                const bool whole_row = g.dw == 1 && w0 >= 0 && w0 + g.kw <= g.W;
                const T* s = src;
                for (std::int64_t i = 0; i < g.kh; ++i, s += run) {
                    const std::int64_t h = oh * g.sh - g.ph + i * g.dh;
                    if (h < 0 || h >= g.H) continue;
                    T* dst = image + (h * g.W) * C;
                    if (whole_row) {
                        add_run(dst + w0 * C, s, run);
                        continue;
                    }
                    for (std::int64_t j = 0; j < g.kw; ++j) {
                        const std::int64_t w = w0 + j * g.dw;
                        if (w >= 0 && w < g.W) add_run(dst + w * C, s + j * C, C);
                    }
                }
            }
        }
    }
}

}  // namespace nhwc_detail
}  // namespace mtd

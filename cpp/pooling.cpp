// Max-pool backward in one pass for windows that tile the input exactly (stride == kernel,
// no padding, sizes divisible).
//
// NumPy's loop (minitorch_dist/ops/pooling.py, twin: kernels/reference.py
// max_pool_backward) makes four passes per kernel tap: x == out, "and no earlier tap",
// "taken so far", grad * hit. This loop reads x, out and grad once and writes dx once, with
// the same bits: each window's gradient goes to its FIRST tap (row-major) equal to the
// window's max, every other element gets grad * 0 (a product, as NumPy's grad * hit: -0
// for a negative grad, NaN for an infinite or NaN one), and a window whose max is NaN has
// no hit at all.
//
// Arrays are NCHW by shape with any element strides (Conv2D gives channels-last memory).
// The innermost loop runs along channels when they are x's closest axis, else along the
// output columns; where every array steps by one element there, it is compiled with unit
// strides so that it vectorises.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "simd_dispatch.h"

namespace mtd {
namespace {

template <typename T>
struct Pool {
    const T* x;
    const T* out;
    const T* grad;
    T* dx;
    std::int64_t n, c, oh, ow, kh, kw;
    std::int64_t xs[4], os[4], gs[4], ds[4];   // element strides, NCHW order
};

// Inner strides of one row of windows: x, out, grad, dx.
struct Steps {
    std::int64_t x, o, g, d;
};

// A 2x2 window's gradient `gk` routed to the first of its taps (row-major) that holds the
// max (e0..e3: tap == max), grad * 0 at the others: NumPy's bits, as 0/1 selects in T, so
// the loops that call it vectorise.
template <typename T>
MTD_INLINE void first_of_four(T gk, bool e0, bool e1, bool e2, bool e3, T& d0, T& d1, T& d2,
                              T& d3) {
    const T s0 = e0 ? T(1) : T(0), s1 = e1 ? T(1) : T(0);
    const T s2 = e2 ? T(1) : T(0), s3 = e3 ? T(1) : T(0);
    const T t1 = s0 > s1 ? s0 : s1, t2 = t1 > s2 ? t1 : s2;
    d0 = gk * s0;
    d1 = gk * (s1 > s0 ? T(1) : T(0));
    d2 = gk * (s2 > t1 ? T(1) : T(0));
    d3 = gk * (s3 > t2 ? T(1) : T(0));
}

// One row of `len` windows along the inner axis, each window's taps in row-major order.
// xtap/dtap: each tap's offset in x and dx from the window's first element. Taps > 0 and
// S > 0 fix the tap count and the inner steps at compile time (x and dx step S, out and
// grad 1) so that the loop vectorises; 0 reads them from `taps` and `st`. The flags are
// 0/1 in T, as NumPy's bool hit becomes in grad * hit: selects, no branches.
template <int Taps, int S, typename T>
MTD_INLINE void window_row(const T* x, const T* o, const T* g, T* d, const Steps& st,
                           std::int64_t len, const std::int64_t* xtap, const std::int64_t* dtap,
                           int taps) {
    static_assert(Taps == 0 || Taps == 4, "a fixed loop exists for 2x2 windows only");
    const int nt = Taps > 0 ? Taps : taps;
    const std::int64_t sx = S > 0 ? S : st.x, sd = S > 0 ? S : st.d;
    const std::int64_t so = S > 0 ? 1 : st.o, sg = S > 0 ? 1 : st.g;
    if constexpr (Taps == 4 && S == 2) {
        // C-contiguous NCHW: a window's two taps of a row are neighbours, so each row of x
        // and dx is read and written as whole vectors (even and odd elements)
        const T* __restrict x0 = x + xtap[0];
        const T* __restrict x1 = x + xtap[2];
        T* __restrict d0 = d + dtap[0];
        T* __restrict d1 = d + dtap[2];
        const T* __restrict ro = o;
        const T* __restrict rg = g;
#pragma GCC ivdep
        for (std::int64_t k = 0; k < len; ++k) {
            const T ok = ro[k], gk = rg[k];
            first_of_four(gk, x0[2 * k] == ok, x0[2 * k + 1] == ok, x1[2 * k] == ok,
                          x1[2 * k + 1] == ok, d0[2 * k], d0[2 * k + 1], d1[2 * k],
                          d1[2 * k + 1]);
        }
        return;
    }
    if constexpr (Taps == 4) {    // restrict: dx is a new array, so the loop need not check overlaps
        const T* __restrict x0 = x + xtap[0];
        const T* __restrict x1 = x + xtap[1];
        const T* __restrict x2 = x + xtap[2];
        const T* __restrict x3 = x + xtap[3];
        T* __restrict d0 = d + dtap[0];
        T* __restrict d1 = d + dtap[1];
        T* __restrict d2 = d + dtap[2];
        T* __restrict d3 = d + dtap[3];
        const T* __restrict ro = o;
        const T* __restrict rg = g;
#pragma GCC ivdep
        for (std::int64_t k = 0; k < len; ++k) {
            const T ok = ro[k * so], gk = rg[k * sg];
            first_of_four(gk, x0[k * sx] == ok, x1[k * sx] == ok, x2[k * sx] == ok,
                          x3[k * sx] == ok, d0[k * sd], d1[k * sd], d2[k * sd], d3[k * sd]);
        }
        return;
    }
    for (std::int64_t k = 0; k < len; ++k) {
        const T ok = o[k * so], gk = g[k * sg];
        T taken = T(0);
        for (int t = 0; t < nt; ++t) {
            const T seen = x[xtap[t] + k * sx] == ok ? T(1) : T(0);
            const T hit = seen > taken ? T(1) : T(0);
            d[dtap[t] + k * sd] = gk * hit;
            taken = seen > taken ? seen : taken;
        }
    }
}

// The tap offsets of a window in an array with element strides `s` (NCHW order).
void tap_offsets(const std::int64_t* s, std::int64_t kh, std::int64_t kw, std::int64_t* offsets) {
    for (std::int64_t i = 0; i < kh; ++i)
        for (std::int64_t j = 0; j < kw; ++j) offsets[i * kw + j] = i * s[2] + j * s[3];
}

// Inner loop along channels: for each (n, oh, ow) the C windows at that position.
template <int Taps, int S, typename T>
MTD_INLINE void channels_inner(const Pool<T>& p, const std::int64_t* xtap,
                               const std::int64_t* dtap) {
    const int taps = static_cast<int>(p.kh * p.kw);
    const Steps st{p.xs[1], p.os[1], p.gs[1], p.ds[1]};
    for (std::int64_t b = 0; b < p.n; ++b)
        for (std::int64_t r = 0; r < p.oh; ++r)
            for (std::int64_t q = 0; q < p.ow; ++q) {
                const std::int64_t h = r * p.kh, w = q * p.kw;
                window_row<Taps, S>(p.x + b * p.xs[0] + h * p.xs[2] + w * p.xs[3],
                                    p.out + b * p.os[0] + r * p.os[2] + q * p.os[3],
                                    p.grad + b * p.gs[0] + r * p.gs[2] + q * p.gs[3],
                                    p.dx + b * p.ds[0] + h * p.ds[2] + w * p.ds[3], st, p.c,
                                    xtap, dtap, taps);
            }
}

// Inner loop along output columns: for each (n, c, oh) the OW windows of that row.
template <int Taps, int S, typename T>
MTD_INLINE void columns_inner(const Pool<T>& p, const std::int64_t* xtap,
                              const std::int64_t* dtap) {
    const int taps = static_cast<int>(p.kh * p.kw);
    const Steps st{p.kw * p.xs[3], p.os[3], p.gs[3], p.kw * p.ds[3]};
    for (std::int64_t b = 0; b < p.n; ++b)
        for (std::int64_t ch = 0; ch < p.c; ++ch)
            for (std::int64_t r = 0; r < p.oh; ++r) {
                const std::int64_t h = r * p.kh;
                window_row<Taps, S>(p.x + b * p.xs[0] + ch * p.xs[1] + h * p.xs[2],
                                    p.out + b * p.os[0] + ch * p.os[1] + r * p.os[2],
                                    p.grad + b * p.gs[0] + ch * p.gs[1] + r * p.gs[2],
                                    p.dx + b * p.ds[0] + ch * p.ds[1] + h * p.ds[2], st, p.ow,
                                    xtap, dtap, taps);
            }
}

// Which loop runs: along channels or columns, and whether as the vectorised 2x2 loop.
enum class Plan { channels_2x2, columns_2x2, channels, columns };

template <typename T>
MTD_INLINE void run_pool(const Pool<T>& p, Plan plan, const std::int64_t* xtap,
                         const std::int64_t* dtap) {
    switch (plan) {
        case Plan::channels_2x2: return channels_inner<4, 1>(p, xtap, dtap);
        case Plan::columns_2x2: return columns_inner<4, 2>(p, xtap, dtap);
        case Plan::channels: return channels_inner<0, 0>(p, xtap, dtap);
        case Plan::columns: return columns_inner<0, 0>(p, xtap, dtap);
    }
}

template <typename T>
void pool_baseline(const Pool<T>& p, Plan plan, const std::int64_t* xtap, const std::int64_t* dtap) {
    run_pool(p, plan, xtap, dtap);
}

#if MTD_HAVE_AVX2
template <typename T>
MTD_AVX2 void pool_avx2(const Pool<T>& p, Plan plan, const std::int64_t* xtap,
                        const std::int64_t* dtap) {
    run_pool(p, plan, xtap, dtap);
}
#endif

// The loop for these strides: a 2x2 window whose inner steps are those of channels-last
// memory (all 1) or of C-contiguous NCHW (x and dx 2, out and grad 1) takes a fixed loop.
template <typename T>
Plan plan_of(const Pool<T>& p) {
    const bool square2 = p.kh == 2 && p.kw == 2;
    if (std::llabs(p.xs[1]) < std::llabs(p.xs[3])) {
        const bool unit = p.xs[1] == 1 && p.os[1] == 1 && p.gs[1] == 1 && p.ds[1] == 1;
        return square2 && unit ? Plan::channels_2x2 : Plan::channels;
    }
    const bool unit = p.xs[3] == 1 && p.os[3] == 1 && p.gs[3] == 1 && p.ds[3] == 1;
    return square2 && unit ? Plan::columns_2x2 : Plan::columns;
}

// Element strides of `a`; throws unless each byte stride is a whole number of elements.
void element_strides(const py::array& a, const char* name, std::int64_t* out) {
    const py::ssize_t size = a.itemsize();
    for (int d = 0; d < 4; ++d) {
        if (a.strides(d) % size != 0)
            throw py::value_error(std::string(name) + " has strides that are not whole elements");
        out[d] = a.strides(d) / size;
    }
    if (reinterpret_cast<std::uintptr_t>(a.data()) % size != 0)
        throw py::value_error(std::string(name) + " must be aligned");
}

void require_shape(const py::array& a, const char* name, std::int64_t n, std::int64_t c,
                   std::int64_t h, std::int64_t w) {
    if (a.ndim() != 4 || a.shape(0) != n || a.shape(1) != c || a.shape(2) != h || a.shape(3) != w)
        throw py::value_error(std::string(name) + " must have shape (" + std::to_string(n) + ", " +
                              std::to_string(c) + ", " + std::to_string(h) + ", " +
                              std::to_string(w) + "), got " + shape_str(a));
}

template <typename T>
void max_pool_backward_typed(const py::array& x, const py::array& out, const py::array& grad,
                             py::array& dx, std::int64_t kh, std::int64_t kw) {
    Pool<T> p{cdata_of<T>(x), cdata_of<T>(out), cdata_of<T>(grad), data_of<T>(dx),
              out.shape(0), out.shape(1), out.shape(2), out.shape(3), kh, kw, {}, {}, {}, {}};
    element_strides(x, "x", p.xs);
    element_strides(out, "out", p.os);
    element_strides(grad, "grad", p.gs);
    element_strides(dx, "dx", p.ds);
    if (p.n * p.c * p.oh * p.ow == 0) return;
    std::vector<std::int64_t> xtap(kh * kw), dtap(kh * kw);
    tap_offsets(p.xs, kh, kw, xtap.data());
    tap_offsets(p.ds, kh, kw, dtap.data());
    const Plan plan = plan_of(p);
    py::gil_scoped_release nogil;
#if MTD_HAVE_AVX2
    if (cpu_has_avx2()) return pool_avx2(p, plan, xtap.data(), dtap.data());
#endif
    pool_baseline(p, plan, xtap.data(), dtap.data());
}

void max_pool_backward(const py::array& x, const py::array& out, const py::array& grad,
                       py::array& dx, std::int64_t kh, std::int64_t kw) {
    if (kh < 1 || kw < 1) throw py::value_error("kh and kw must be >= 1");
    if (out.ndim() != 4) throw py::value_error("out must be 4-D, got shape " + shape_str(out));
    const std::int64_t n = out.shape(0), c = out.shape(1), oh = out.shape(2), ow = out.shape(3);
    require_shape(x, "x", n, c, oh * kh, ow * kw);
    require_shape(grad, "grad", n, c, oh, ow);
    require_shape(dx, "dx", n, c, oh * kh, ow * kw);
    require_same_dtype(x, out, "x", "out");
    require_same_dtype(x, grad, "x", "grad");
    require_same_dtype(x, dx, "x", "dx");
    require_writeable(dx, "dx");
    dispatch_float(x, "x", [&](auto tag) {
        max_pool_backward_typed<decltype(tag)>(x, out, grad, dx, kh, kw);
    });
}

}  // namespace

void register_pooling(py::module_& m) {
    m.def("max_pool_backward", &max_pool_backward, py::arg("x"), py::arg("out"), py::arg("grad"),
          py::arg("dx"), py::arg("kh"), py::arg("kw"),
          "Writes into dx the gradient of a max pooling whose kh x kw windows tile x exactly "
          "(stride == kernel): each window's grad at its first maximum, grad * 0 elsewhere.");
}

}  // namespace mtd

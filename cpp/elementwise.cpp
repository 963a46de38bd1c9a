// One-pass element-wise kernels of a dense layer's step: ReLU forward and backward and the
// bias gradient's column sum.
//
// NumPy does each of these in two passes or through a temporary (g * (y > 0) builds a bool
// array, then casts it to float; an axis-0 sum sets up an iterator); these loops read each
// input once and write the result once. Each gives the bits of its NumPy twin in
// minitorch_dist/kernels/reference.py (python_tests/test_step_kernels.py checks them):
//   relu:          np.maximum(x, 0)   (NaN kept, -0 becomes +0)
//   relu_backward: g * (y > 0)        (a product, so g*0 keeps the sign and inf*0 is NaN)
//   sum_rows:      g.sum(axis=0)      (NumPy adds the rows in order, from +0, when a row
//                                      has two or more elements; the wrapper sends no other)
#include <cstdint>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "simd_dispatch.h"

namespace mtd {
namespace {

// Unrolled by 8: the loop counter and branch are paid once per 8 vectors, not per vector.
template <typename T>
MTD_INLINE void relu_loop(const T* x, T* out, std::int64_t n) {
#pragma GCC unroll 8
    for (std::int64_t j = 0; j < n; ++j) {
        const T v = x[j];
        out[j] = v <= T(0) ? T(0) : v;   // NaN fails the test and is kept, as in maximum
    }
}

template <typename T>
MTD_INLINE void relu_backward_loop(const T* g, const T* y, T* out, std::int64_t n) {
#pragma GCC unroll 8
    for (std::int64_t j = 0; j < n; ++j) out[j] = g[j] * (y[j] > T(0) ? T(1) : T(0));
}

// Columns in blocks of four vectors whose sums stay in registers down all the rows; each
// column still adds its rows in order, from +0. The running sum is always the register
// operand and so the first one, as NumPy's out + in: a NaN plus a NaN gives NumPy's NaN.
template <typename T>
MTD_INLINE void sum_rows_loop(const T* g, T* out, std::int64_t rows, std::int64_t cols) {
    constexpr int W = 128 / sizeof(T);
    std::int64_t j0 = 0;
    for (; j0 + W <= cols; j0 += W) {
        T acc[W];
#pragma GCC unroll 32
        for (int k = 0; k < W; ++k) acc[k] = T(0);
        const T* row = g + j0;
        for (std::int64_t i = 0; i < rows; ++i, row += cols) {
#pragma GCC unroll 32
            for (int k = 0; k < W; ++k) acc[k] = acc[k] + row[k];
        }
#pragma GCC unroll 32
        for (int k = 0; k < W; ++k) out[j0 + k] = acc[k];
    }
    for (std::int64_t j = j0; j < cols; ++j) {     // the last columns, one at a time
        T acc = T(0);
        for (std::int64_t i = 0; i < rows; ++i) acc = acc + g[i * cols + j];
        out[j] = acc;
    }
}

// Each loop in a baseline and an AVX2 build; `Kind` names the loop.
enum class Kind { relu, relu_backward, sum_rows };

template <Kind K, typename T>
MTD_INLINE void run_loop(const T* a, const T* b, T* out, std::int64_t rows, std::int64_t cols) {
    if constexpr (K == Kind::relu) relu_loop(a, out, rows * cols);
    if constexpr (K == Kind::relu_backward) relu_backward_loop(a, b, out, rows * cols);
    if constexpr (K == Kind::sum_rows) sum_rows_loop(a, out, rows, cols);
}

template <Kind K, typename T>
void loop_baseline(const T* a, const T* b, T* out, std::int64_t rows, std::int64_t cols) {
    run_loop<K>(a, b, out, rows, cols);
}

#if MTD_HAVE_AVX2
template <Kind K, typename T>
MTD_AVX2 void loop_avx2(const T* a, const T* b, T* out, std::int64_t rows, std::int64_t cols) {
    run_loop<K>(a, b, out, rows, cols);
}
#endif

template <Kind K, typename T>
void run(const py::array& a, const py::array* b, py::array& out, std::int64_t rows,
         std::int64_t cols) {
    const T* pa = cdata_of<T>(a);
    const T* pb = b ? cdata_of<T>(*b) : nullptr;
    T* po = data_of<T>(out);
    py::gil_scoped_release nogil;
#if MTD_HAVE_AVX2
    if (cpu_has_avx2()) return loop_avx2<K>(pa, pb, po, rows, cols);
#endif
    loop_baseline<K>(pa, pb, po, rows, cols);
}

// A new C-contiguous array of `shape` and a's dtype.
py::array empty_like_dtype(const py::array& a, std::vector<py::ssize_t> shape) {
    return py::array(a.dtype(), std::move(shape));
}

std::vector<py::ssize_t> shape_of(const py::array& a) {
    return std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim());
}

py::array relu(const py::array& x) {
    require_layout(x, "x", -1);
    py::array out = empty_like_dtype(x, shape_of(x));
    dispatch_float(x, "x", [&](auto tag) {
        run<Kind::relu, decltype(tag)>(x, nullptr, out, 1, x.size());
    });
    return out;
}

py::array relu_backward(const py::array& g, const py::array& y) {
    require_layout(g, "g", -1);
    require_layout(y, "y", -1);
    require_same_dtype(g, y, "g", "y");
    if (shape_of(g) != shape_of(y))
        throw py::value_error("g has shape " + shape_str(g) + " but y has shape " + shape_str(y));
    py::array out = empty_like_dtype(y, shape_of(y));
    dispatch_float(g, "g", [&](auto tag) {
        run<Kind::relu_backward, decltype(tag)>(g, &y, out, 1, g.size());
    });
    return out;
}

py::array sum_rows(const py::array& g) {
    require_layout(g, "g", 2);
    py::array out = empty_like_dtype(g, {g.shape(1)});
    dispatch_float(g, "g", [&](auto tag) {
        run<Kind::sum_rows, decltype(tag)>(g, nullptr, out, g.shape(0), g.shape(1));
    });
    return out;
}

}  // namespace

void register_elementwise(py::module_& m) {
    m.def("relu", &relu, py::arg("x"), "max(x, 0) as np.maximum gives it, in a new array.");
    m.def("relu_backward", &relu_backward, py::arg("g"), py::arg("y"),
          "g * (y > 0) in one pass, in a new array.");
    m.def("sum_rows", &sum_rows, py::arg("g"),
          "g.sum(axis=0) of a 2-D g, the rows added in order from +0, in a new array.");
}

}  // namespace mtd

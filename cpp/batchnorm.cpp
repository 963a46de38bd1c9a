// Batch normalisation over the rows of a channels-last (rows, C) array, training mode.
//
// A Conv2D output is channels-last memory, so BatchNorm2d's statistics are column sums of a
// (N*H*W, C) matrix. NumPy needs 7-8 whole-array passes for the forward (mean, centre,
// square, mean, scale, shift, each a fresh temporary) and as many for the backward; these
// loops make 3 and 2 passes.
//   forward:  mean, biased var per column; xhat = (x - mean) / sqrt(var + eps);
//             out = xhat * gamma + beta.
//   backward: sg = sum(g), sgx = sum(g * xhat) per column;
//             dx = gamma / std * (g - sg / R - xhat * sgx / R).
// Column sums are made in blocks of kBlockRows rows (the block's partial sums in double),
// and the blocks' partials are added in block order: the same bits at any thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "worker_threads.h"

namespace mtd {
namespace {

constexpr std::int64_t kBlockRows = 512;

// Workers for a pass over R x C values: at least 8x the shared minimum per thread, since each
// pass is a light, memory-bound loop and starting a thread costs tens of microseconds (more
// on a busy machine, where the thread may wait for a core).
inline int pass_workers(std::int64_t R, std::int64_t C) {
    return worker_count(R, std::max<std::int64_t>(1, C / 8));
}

// Sums per column of f(row, column) over the rows, in double, block by block.
template <typename F>
void column_sums(std::int64_t rows, std::int64_t cols, double* total, F&& f, int outputs) {
    const std::int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
    std::vector<double> partial(static_cast<std::size_t>(blocks * cols * outputs), 0.0);
    const int workers = pass_workers(rows, cols * 2);
    run_blocks(workers, [&](int w) {
        for (std::int64_t b = blocks * w / workers; b < blocks * (w + 1) / workers; ++b) {
            double* acc = partial.data() + b * cols * outputs;
            const std::int64_t r1 = std::min(rows, (b + 1) * kBlockRows);
            for (std::int64_t r = b * kBlockRows; r < r1; ++r) f(r, acc);
        }
    });
    std::fill(total, total + cols * outputs, 0.0);
    for (std::int64_t b = 0; b < blocks; ++b)
        for (std::int64_t k = 0; k < cols * outputs; ++k) total[k] += partial[b * cols * outputs + k];
}

template <typename T>
void forward_loop(const T* x, const T* gamma, const T* beta, double eps, T* out, T* xhat,
                  T* mean_out, T* var_out, std::int64_t R, std::int64_t C) {
    std::vector<double> sums(C), sq(C), mean(C);
    column_sums(R, C, sums.data(), [&](std::int64_t r, double* acc) {
        const T* row = x + r * C;
        for (std::int64_t c = 0; c < C; ++c) acc[c] += static_cast<double>(row[c]);
    }, 1);
    for (std::int64_t c = 0; c < C; ++c) mean[c] = sums[c] / static_cast<double>(R);
    column_sums(R, C, sq.data(), [&](std::int64_t r, double* acc) {
        const T* row = x + r * C;
        for (std::int64_t c = 0; c < C; ++c) {
            const double d = static_cast<double>(row[c]) - mean[c];
            acc[c] += d * d;
        }
    }, 1);
    std::vector<T> m(C), inv(C), scale(C), shift(C);
    for (std::int64_t c = 0; c < C; ++c) {
        const double var = sq[c] / static_cast<double>(R);
        mean_out[c] = static_cast<T>(mean[c]);
        var_out[c] = static_cast<T>(var);
        m[c] = static_cast<T>(mean[c]);
        inv[c] = static_cast<T>(1.0 / std::sqrt(var + eps));
        scale[c] = gamma[c];
        shift[c] = beta[c];
    }
    const int workers = pass_workers(R, C);
    run_blocks(workers, [&](int w) {
        for (std::int64_t r = R * w / workers; r < R * (w + 1) / workers; ++r) {
            const T* row = x + r * C;
            T* h = xhat + r * C;
            T* o = out + r * C;
            for (std::int64_t c = 0; c < C; ++c) {
                const T v = (row[c] - m[c]) * inv[c];
                h[c] = v;
                o[c] = v * scale[c] + shift[c];
            }
        }
    });
}

template <typename T>
void backward_loop(const T* g, const T* xhat, const T* gamma, const T* inv_std, T* dx,
                   T* dgamma, T* dbeta, std::int64_t R, std::int64_t C) {
    std::vector<double> sums(2 * C);
    column_sums(R, C, sums.data(), [&](std::int64_t r, double* acc) {
        const T* gr = g + r * C;
        const T* hr = xhat + r * C;
        for (std::int64_t c = 0; c < C; ++c) {
            acc[c] += static_cast<double>(gr[c]);
            acc[C + c] += static_cast<double>(gr[c]) * static_cast<double>(hr[c]);
        }
    }, 2);
    std::vector<T> a(C), b(C), k(C);
    for (std::int64_t c = 0; c < C; ++c) {
        dbeta[c] = static_cast<T>(sums[c]);
        dgamma[c] = static_cast<T>(sums[C + c]);
        k[c] = gamma[c] * inv_std[c];                                    // gamma / std
        a[c] = static_cast<T>(sums[c] / static_cast<double>(R));        // mean(g)
        b[c] = static_cast<T>(sums[C + c] / static_cast<double>(R));    // mean(g * xhat)
    }
    if (dx == nullptr) return;
    const int workers = pass_workers(R, C);
    run_blocks(workers, [&](int w) {
        for (std::int64_t r = R * w / workers; r < R * (w + 1) / workers; ++r) {
            const T* gr = g + r * C;
            const T* hr = xhat + r * C;
            T* d = dx + r * C;
            for (std::int64_t c = 0; c < C; ++c) d[c] = k[c] * (gr[c] - a[c] - hr[c] * b[c]);
        }
    });
}

void require_vector(const py::array& v, const py::array& like, std::int64_t C, const char* name) {
    require_layout(v, name, 1);
    require_same_dtype(like, v, "x", name);
    if (v.shape(0) != C)
        throw py::value_error(std::string(name) + " must have " + std::to_string(C) +
                              " elements, got " + shape_str(v));
}

void require_same_shape(const py::array& a, const py::array& b, const char* an, const char* bn) {
    require_layout(b, bn, 2);
    require_same_dtype(a, b, an, bn);
    if (a.shape(0) != b.shape(0) || a.shape(1) != b.shape(1))
        throw py::value_error(std::string(bn) + " has shape " + shape_str(b) + ", expected " +
                              shape_str(a));
}

void bn_forward(const py::array& x, const py::array& gamma, const py::array& beta, double eps,
                py::array& out, py::array& xhat, py::array& mean, py::array& var) {
    require_layout(x, "x", 2);
    const std::int64_t R = x.shape(0), C = x.shape(1);
    if (R < 1) throw py::value_error("x must have at least one row");
    require_vector(gamma, x, C, "gamma");
    require_vector(beta, x, C, "beta");
    for (py::array* a : {&out, &xhat}) {
        require_same_shape(x, *a, "x", "out");
        require_writeable(*a, "out");
    }
    for (py::array* v : {&mean, &var}) {
        require_vector(*v, x, C, "mean/var");
        require_writeable(*v, "mean/var");
    }
    dispatch_float(x, "x", [&](auto tag) {
        using T = decltype(tag);
        const T *px = cdata_of<T>(x), *pg = cdata_of<T>(gamma), *pb = cdata_of<T>(beta);
        T *po = data_of<T>(out), *ph = data_of<T>(xhat), *pm = data_of<T>(mean),
          *pv = data_of<T>(var);
        py::gil_scoped_release nogil;
        forward_loop(px, pg, pb, eps, po, ph, pm, pv, R, C);
    });
}

void bn_backward(const py::array& g, const py::array& xhat, const py::array& gamma,
                 const py::array& inv_std, py::object dx_obj, py::array& dgamma,
                 py::array& dbeta) {
    require_layout(g, "g", 2);
    const std::int64_t R = g.shape(0), C = g.shape(1);
    require_same_shape(g, xhat, "g", "xhat");
    require_vector(gamma, g, C, "gamma");
    require_vector(inv_std, g, C, "inv_std");
    for (py::array* v : {&dgamma, &dbeta}) {
        require_vector(*v, g, C, "dgamma/dbeta");
        require_writeable(*v, "dgamma/dbeta");
    }
    py::array dx;
    if (!dx_obj.is_none()) {
        dx = dx_obj.cast<py::array>();
        require_same_shape(g, dx, "g", "dx");
        require_writeable(dx, "dx");
    }
    dispatch_float(g, "g", [&](auto tag) {
        using T = decltype(tag);
        const T *pg = cdata_of<T>(g), *ph = cdata_of<T>(xhat), *pgam = cdata_of<T>(gamma),
                *pinv = cdata_of<T>(inv_std);
        T* pdx = dx_obj.is_none() ? nullptr : data_of<T>(dx);
        T *pdg = data_of<T>(dgamma), *pdb = data_of<T>(dbeta);
        py::gil_scoped_release nogil;
        backward_loop(pg, ph, pgam, pinv, pdx, pdg, pdb, R, C);
    });
}

}  // namespace

void register_batchnorm(py::module_& m) {
    m.def("bn_forward", &bn_forward, py::arg("x"), py::arg("gamma"), py::arg("beta"),
          py::arg("eps"), py::arg("out"), py::arg("xhat"), py::arg("mean"), py::arg("var"),
          "Training-mode batch norm over the rows of x (R, C): out, xhat, mean, biased var.");
    m.def("bn_backward", &bn_backward, py::arg("g"), py::arg("xhat"), py::arg("gamma"),
          py::arg("inv_std"), py::arg("dx"), py::arg("dgamma"), py::arg("dbeta"),
          "Training-mode batch norm backward over rows: dx (or None), dgamma, dbeta.");
}

}  // namespace mtd

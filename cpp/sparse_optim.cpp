// Fused sparse optimizer updates for embedding tables kept on the host.
//
// Gradients arrive as (ids, rows). Duplicate ids are merged first so every touched row is
// updated exactly once with its summed gradient; untouched rows (and their optimizer state)
// are left alone, which is what makes these "lazy" updates cheap for large vocabularies.
//
// The merge is a stable radix sort of the ids (row_groups.h), in memory reused from call to
// call. After it every distinct row is independent, so large updates split the rows into
// contiguous blocks, one per worker thread, balanced by rows and ids. Each row is computed by
// the same code whatever the thread count, so results are bit-identical with 1 or many
// threads. The rows of a large table and of its state are scattered over memory: the loop
// prefetches them a few rows ahead, which more than halves the time of a 10M-row table.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "row_groups.h"
#include "worker_threads.h"

namespace mtd {
namespace {

using NamedArrays = std::initializer_list<std::pair<py::array*, const char*>>;

// Checks param and its state tables (same shape/dtype, 2-D, writeable) against ids and grads.
void check_update_args(py::array& param, NamedArrays state, const py::array& ids,
                       const py::array& grads) {
    require_layout(param, "param", 2);
    require_writeable(param, "param");
    for (auto& [arr, name] : state) {
        require_layout(*arr, name, 2);
        require_writeable(*arr, name);
        require_same_dtype(param, *arr, "param", name);
        if (arr->shape(0) != param.shape(0) || arr->shape(1) != param.shape(1))
            throw py::value_error(std::string(name) + " has shape " + shape_str(*arr) +
                                  " but param has shape " + shape_str(param));
    }
    require_layout(ids, "ids", 1);
    require_layout(grads, "grads", 2);
    require_same_dtype(param, grads, "param", "grads");
    if (grads.shape(0) != ids.shape(0) || grads.shape(1) != param.shape(1))
        throw py::value_error("grads has shape " + shape_str(grads) + ", expected (" +
                              std::to_string(ids.shape(0)) + ", " +
                              std::to_string(param.shape(1)) + ")");
}

// How far ahead the row loop prefetches (see prefetch_row): the table and state rows of the
// group so many groups on, the gradient rows of the ids so many positions on.
constexpr std::int64_t kPrefetchGroups = 16;
constexpr std::int64_t kPrefetchIds = 16;

// Runs row_fn(row_id, summed_grad_row, spare_row) once per distinct id, without the GIL, on up to
// worker_count() threads (distinct rows never share memory). `tables` (param and its state)
// are the arrays row_fn updates, for the prefetch. Throws IndexError (and changes nothing) if
// an id is out of range.
template <typename T, typename RowFn>
void for_each_merged_row(const py::array& param, const py::array& ids, const py::array& grads,
                         std::initializer_list<const T*> tables, RowFn&& row_fn) {
    const std::int64_t rows = param.shape(0), d = param.shape(1), n = ids.shape(0);
    dispatch_index(ids, [&](auto itag) {
        using I = decltype(itag);
        const I* idx = cdata_of<I>(ids);
        const T* g = cdata_of<T>(grads);
        std::int64_t bad_pos;
        {
            py::gil_scoped_release nogil;
            bad_pos = first_bad_id(idx, n, rows);
            if (bad_pos < 0) {
                ThreadRowGroups lease;
                RowGroups& groups = lease.get();
                group_rows(idx, n, groups);
                const std::int64_t count = groups.size();
                const int workers = worker_count(count, d);
                // Two scratch rows per worker (the summed gradient, and a spare for the
                // row function), allocated here so that nothing can throw inside a thread.
                std::vector<T> scratch(static_cast<std::size_t>(2 * d) * workers);
                const std::size_t row_bytes = sizeof(T) * static_cast<std::size_t>(d);
                auto run_block = [&](int w) {
                    const std::int64_t begin = block_start(groups, w, workers);
                    const std::int64_t end = block_start(groups, w + 1, workers);
                    T* own = scratch.data() + static_cast<std::int64_t>(w) * 2 * d;
                    // Gradient rows are read in sorted order, from all over `grads`: ask for
                    // them kPrefetchIds positions ahead, duplicates included.
                    const std::int64_t* order = groups.order.data();
                    const std::int64_t stop = groups.starts[end];
                    std::int64_t next = groups.starts[begin];  // next position to prefetch
                    for (std::int64_t grp = begin; grp < end; ++grp) {
                        const std::int64_t ahead = grp + kPrefetchGroups;
                        if (ahead < end) {
                            const std::int64_t at = groups.ids[ahead] * d;
                            for (const T* table : tables) prefetch_row<true>(table + at, row_bytes);
                        }
                        const std::int64_t upto =
                            std::min(groups.starts[grp + 1] + kPrefetchIds, stop);
                        for (; next < upto; ++next)
                            prefetch_row<false>(g + order[next] * d, row_bytes);
                        row_fn(groups.ids[grp], group_sum(groups, grp, g, d, own), own + d);
                    }
                };
                run_blocks(workers, run_block);
            }
        }
        if (bad_pos >= 0) throw bad_id_error(static_cast<std::int64_t>(idx[bad_pos]), rows);
    });
}

void sparse_sgd(py::array& param, const py::array& ids, const py::array& grads, double lr,
                double weight_decay) {
    check_update_args(param, {}, ids, grads);
    const std::int64_t d = param.shape(1);
    dispatch_float(param, "param", [&](auto tag) {
        using T = decltype(tag);
        const T lr_t = static_cast<T>(lr), wd = static_cast<T>(weight_decay);
        T* base = data_of<T>(param);
        for_each_merged_row<T>(param, ids, grads, {base}, [&](std::int64_t row, const T* g, T*) {
            T* w = base + row * d;
            if (weight_decay != 0.0) {
                for (std::int64_t j = 0; j < d; ++j) w[j] -= lr_t * (g[j] + wd * w[j]);
            } else {
                for (std::int64_t j = 0; j < d; ++j) w[j] -= lr_t * g[j];
            }
        });
    });
}

// One row of lazy Adam. kNesterov puts b1*m + (1-b1)*g in the numerator (MindSpore's
// use_nesterov); the gradient already includes weight decay.
template <bool kNesterov, typename T>
void adam_row(T* w, T* m, T* v, const T* g, std::int64_t d, T b1, T b2, T one_b1, T one_b2,
              T lr_t, T eps) {
    for (std::int64_t j = 0; j < d; ++j) {
        const T gj = g[j];
        m[j] = b1 * m[j] + one_b1 * gj;
        v[j] = b2 * v[j] + one_b2 * (gj * gj);
        const T numerator = kNesterov ? b1 * m[j] + one_b1 * gj : m[j];
        w[j] -= lr_t * numerator / (std::sqrt(v[j]) + eps);
    }
}

// g + weight_decay * w for one row, in `out` (the gradient row itself when there is no decay).
template <typename T>
const T* decayed_row(const T* g, const T* w, std::int64_t d, T wd, T* out) {
    if (wd == T(0)) return g;
    for (std::int64_t j = 0; j < d; ++j) out[j] = g[j] + wd * w[j];
    return out;
}

// Adam with the bias correction folded into the step size (as TensorFlow, MindSpore and
// torch.optim.SparseAdam do): w -= lr*sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps).
void lazy_adam(py::array& param, py::array& m, py::array& v, const py::array& ids,
               const py::array& grads, double lr, double beta1, double beta2, double eps,
               std::int64_t step, double weight_decay, bool use_nesterov) {
    check_update_args(param, {{&m, "m"}, {&v, "v"}}, ids, grads);
    if (step < 1) throw py::value_error("step must be >= 1 (it counts updates from 1)");
    const std::int64_t d = param.shape(1);
    const double step_size =
        lr * std::sqrt(1.0 - std::pow(beta2, step)) / (1.0 - std::pow(beta1, step));
    dispatch_float(param, "param", [&](auto tag) {
        using T = decltype(tag);
        const T b1 = static_cast<T>(beta1), b2 = static_cast<T>(beta2);
        const T one_b1 = static_cast<T>(1.0 - beta1), one_b2 = static_cast<T>(1.0 - beta2);
        const T lr_t = static_cast<T>(step_size), eps_t = static_cast<T>(eps);
        const T wd = static_cast<T>(weight_decay);
        T *w0 = data_of<T>(param), *m0 = data_of<T>(m), *v0 = data_of<T>(v);
        for_each_merged_row<T>(param, ids, grads, {w0, m0, v0},
                               [&](std::int64_t row, const T* g, T* spare) {
            T *w = w0 + row * d, *mr = m0 + row * d, *vr = v0 + row * d;
            const T* gr = decayed_row(g, w, d, wd, spare);
            if (use_nesterov)
                adam_row<true>(w, mr, vr, gr, d, b1, b2, one_b1, one_b2, lr_t, eps_t);
            else
                adam_row<false>(w, mr, vr, gr, d, b1, b2, one_b1, one_b2, lr_t, eps_t);
        });
    });
}

// One row of FTRL-proximal; `power(a)` is a^(-lr_power). Written without branches so the
// loop vectorises (the common lr_power = -0.5 instantiation uses sqrt).
template <typename T, typename Power>
void ftrl_row(T* w, T* acc, T* lin, const T* g, std::int64_t d, T lr, T l1, T two_l2,
              Power power) {
    for (std::int64_t j = 0; j < d; ++j) {
        const T acc_new = acc[j] + g[j] * g[j];
        const T p_new = power(acc_new);
        const T z = lin[j] + (g[j] - (p_new - power(acc[j])) / lr * w[j]);
        const bool active = std::abs(z) > l1;  // else the weight is exactly zero
        // Selects, not a branch, on both operands keep the division unconditional (vectorisable).
        const T numerator = active ? std::copysign(l1, z) - z : T(0);
        const T quadratic = active ? p_new / lr + two_l2 : T(1);
        w[j] = numerator / quadratic;
        lin[j] = z;
        acc[j] = acc_new;
    }
}

// FTRL-proximal (McMahan et al.), in TensorFlow's ApplyFtrl form; weight_decay adds
// weight_decay * w to the gradient first.
void ftrl(py::array& param, py::array& accum, py::array& linear, const py::array& ids,
          const py::array& grads, double lr, double l1, double l2, double lr_power,
          double weight_decay) {
    check_update_args(param, {{&accum, "accum"}, {&linear, "linear"}}, ids, grads);
    if (lr <= 0.0) throw py::value_error("lr must be > 0");
    const std::int64_t d = param.shape(1);
    dispatch_float(param, "param", [&](auto tag) {
        using T = decltype(tag);
        const T lr_t = static_cast<T>(lr), l1_t = static_cast<T>(l1);
        const T two_l2 = static_cast<T>(2.0 * l2), exponent = static_cast<T>(-lr_power);
        const T wd = static_cast<T>(weight_decay);
        T *w0 = data_of<T>(param), *a0 = data_of<T>(accum), *z0 = data_of<T>(linear);
        for_each_merged_row<T>(param, ids, grads, {w0, a0, z0},
                               [&](std::int64_t row, const T* g, T* spare) {
            const std::int64_t at = row * d;
            const T* gr = decayed_row(g, w0 + at, d, wd, spare);
            if (lr_power == -0.5) {
                ftrl_row(w0 + at, a0 + at, z0 + at, gr, d, lr_t, l1_t, two_l2,
                         [](T a) { return std::sqrt(a); });
            } else {
                ftrl_row(w0 + at, a0 + at, z0 + at, gr, d, lr_t, l1_t, two_l2,
                         [exponent](T a) { return std::pow(a, exponent); });
            }
        });
    });
}

// Proximal Adagrad (MindSpore's ApplyProximalAdagrad) on the touched rows:
//   accum += g*g;  prox = w - lr*g/sqrt(accum);
//   w = sign(prox) * max(|prox| - lr*l1, 0) / (1 + lr*l2).
// sqrt(accum) is floored at the smallest normal number, so an element whose accumulator and
// gradient are both zero keeps its value instead of becoming 0/0 (the floor changes nothing
// else: the square root of any positive float is above it).
void proximal_adagrad(py::array& param, py::array& accum, const py::array& ids,
                      const py::array& grads, double lr, double l1, double l2,
                      double weight_decay) {
    check_update_args(param, {{&accum, "accum"}}, ids, grads);
    if (lr < 0.0) throw py::value_error("lr must be >= 0");
    const std::int64_t d = param.shape(1);
    dispatch_float(param, "param", [&](auto tag) {
        using T = decltype(tag);
        const T lr_t = static_cast<T>(lr), lr_l1 = static_cast<T>(lr * l1);
        const T denom = static_cast<T>(1.0 + lr * l2), wd = static_cast<T>(weight_decay);
        const T tiny = std::numeric_limits<T>::min();
        T *w0 = data_of<T>(param), *a0 = data_of<T>(accum);
        for_each_merged_row<T>(param, ids, grads, {w0, a0},
                               [&](std::int64_t row, const T* g, T* spare) {
            T *w = w0 + row * d, *acc = a0 + row * d;
            const T* gr = decayed_row(g, w, d, wd, spare);
            for (std::int64_t j = 0; j < d; ++j) {
                acc[j] += gr[j] * gr[j];
                const T prox = w[j] - lr_t * gr[j] / std::max(std::sqrt(acc[j]), tiny);
                const T shrunk = std::max(std::abs(prox) - lr_l1, T(0));
                w[j] = std::copysign(shrunk, prox) / denom;
            }
        });
    });
}

int set_sparse_threads(int n) {
    if (n < 0) throw py::value_error("the thread count must be >= 0 (0 means automatic)");
    return max_threads.exchange(n);
}

}  // namespace

void register_sparse_optim(py::module_& m) {
    m.def("sparse_sgd", &sparse_sgd, py::arg("param"), py::arg("ids"), py::arg("grads"),
          py::arg("lr"), py::arg("weight_decay") = 0.0,
          "param[id] -= lr * (g + weight_decay * param[id]) per distinct id.");
    m.def("lazy_adam", &lazy_adam, py::arg("param"), py::arg("m"), py::arg("v"),
          py::arg("ids"), py::arg("grads"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"),
          py::arg("eps"), py::arg("step"), py::arg("weight_decay") = 0.0,
          py::arg("use_nesterov") = false, "Adam on the touched rows of param, m and v only.");
    m.def("ftrl", &ftrl, py::arg("param"), py::arg("accum"), py::arg("linear"), py::arg("ids"),
          py::arg("grads"), py::arg("lr"), py::arg("l1"), py::arg("l2"),
          py::arg("lr_power") = -0.5, py::arg("weight_decay") = 0.0,
          "FTRL-proximal on the touched rows.");
    m.def("proximal_adagrad", &proximal_adagrad, py::arg("param"), py::arg("accum"),
          py::arg("ids"), py::arg("grads"), py::arg("lr"), py::arg("l1") = 0.0,
          py::arg("l2") = 0.0, py::arg("weight_decay") = 0.0,
          "Proximal Adagrad on the touched rows.");
    m.def("set_sparse_threads", &set_sparse_threads, py::arg("n"),
          "Most threads a sparse optimizer update may use (0: automatic); returns the old value.");
}

}  // namespace mtd

// Fused multi-tensor optimizer updates for dense gradients: one call updates every
// parameter of a group in place, one pass over each parameter, no temporaries.
//
// The NumPy path (nn/optim/sgd.py, adam.py) is the twin and the oracle. Every element goes
// through the same float operations in the same order as those NumPy statements, with each
// Python scalar rounded to the array's dtype first (NumPy 2 casts a Python float operand to
// the array's dtype), so both give the same bits. The scalars themselves (1 - lr*wd, the
// bias corrections, ...) are computed once in Python and passed in, so no libm call here can
// differ from CPython's. No FMA contraction (the pragma below).
#include <cmath>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "simd_dispatch.h"

namespace mtd {
namespace {

// One parameter's arrays, checked: param, its gradient and its state arrays (all C-contiguous,
// same dtype and element count; param and state writeable).
struct Member {
    py::array param, grad;
    std::vector<py::array> state;
    std::int64_t size = 0;
};

std::vector<Member> collect(const py::sequence& params, const py::sequence& grads,
                            const std::vector<py::sequence>& states,
                            const std::vector<const char*>& state_names) {
    const auto n = params.size();
    if (grads.size() != n)
        throw py::value_error("params and grads must have the same length, got " +
                              std::to_string(n) + " and " + std::to_string(grads.size()));
    for (std::size_t s = 0; s < states.size(); ++s)
        if (states[s].size() != n)
            throw py::value_error(std::string(state_names[s]) + " must have one array per param");
    std::vector<Member> members(n);
    for (std::size_t i = 0; i < n; ++i) {
        Member& mb = members[i];
        mb.param = params[i].cast<py::array>();
        mb.grad = grads[i].cast<py::array>();
        require_layout(mb.param, "param", -1);
        require_writeable(mb.param, "param");
        require_layout(mb.grad, "grad", -1);
        require_same_dtype(mb.param, mb.grad, "param", "grad");
        if (i > 0) require_same_dtype(members[0].param, mb.param, "params[0]", "every param");
        mb.size = mb.param.size();
        if (mb.grad.size() != mb.size)
            throw py::value_error("grad " + std::to_string(i) + " has shape " +
                                  shape_str(mb.grad) + " but param has shape " +
                                  shape_str(mb.param));
        for (std::size_t s = 0; s < states.size(); ++s) {
            py::array st = states[s][i].cast<py::array>();
            require_layout(st, state_names[s], -1);
            require_writeable(st, state_names[s]);
            require_same_dtype(mb.param, st, "param", state_names[s]);
            if (st.size() != mb.size)
                throw py::value_error(std::string(state_names[s]) + " " + std::to_string(i) +
                                      " has shape " + shape_str(st) + " but param has shape " +
                                      shape_str(mb.param));
            mb.state.push_back(st);
        }
    }
    return members;
}

// Runs fn(T{}, member) for every member, without the GIL (the arrays are held by `members`).
template <typename Fn>
void for_each_member(std::vector<Member>& members, Fn&& fn) {
    if (members.empty()) return;
    dispatch_float(members[0].param, "param", [&](auto tag) {
        py::gil_scoped_release nogil;
        for (Member& mb : members) fn(tag, mb);
    });
}

// SGD as nn/optim/sgd.py's plain_step (bufs empty) or heavy_ball_step. Scalars (Python
// floats, rounded to T here):
//   decay   = 1 - lr*wd           (p *= decay before the plain / Nesterov step, if wd)
//   g_scale = lr*inv_scale        (plain / Nesterov: p -= g * g_scale)
//   momentum, keep_scale = (1-dampening)*inv_scale, keep_wd = (1-dampening)*wd,
//   inv_scale, wd                 (first step with dampening: buf = g*inv_scale + p*wd)
//   step_scale = lr (heavy ball) or lr*momentum (Nesterov: p -= buf * step_scale)
// Flags: has_wd, first_dampened (first step with dampening != 0), unit_keep
// (keep_scale == 1: buf += g), nesterov.
struct SgdArgs {
    double decay, g_scale, momentum, keep_scale, keep_wd, inv_scale, wd, step_scale;
    bool has_wd, first_dampened, unit_keep, nesterov;
};

// Unrolled by 8: the loop's own counter and branch are paid once per 8 vectors. p stays the
// first operand of the subtraction, as in NumPy's p -= g*gs, so even a NaN minus a NaN
// gives NumPy's NaN (x86 returns the first one).
template <typename T>
MTD_INLINE void plain_sgd(T* p, const T* g, std::int64_t n, const SgdArgs& a) {
    const T decay = static_cast<T>(a.decay), gs = static_cast<T>(a.g_scale);
    if (a.has_wd) {  // p *= decay, then p -= g * gs: two roundings, as NumPy's two statements
#pragma GCC unroll 8
        for (std::int64_t j = 0; j < n; ++j) p[j] = (p[j] * decay) - g[j] * gs;
    } else {
#pragma GCC unroll 8
        for (std::int64_t j = 0; j < n; ++j) p[j] = p[j] - g[j] * gs;
    }
}

template <typename T>
MTD_INLINE void heavy_ball(T* p, const T* g, T* buf, std::int64_t n, const SgdArgs& a) {
    const T mom = static_cast<T>(a.momentum), ks = static_cast<T>(a.keep_scale);
    const T kwd = static_cast<T>(a.keep_wd), inv = static_cast<T>(a.inv_scale);
    const T wd = static_cast<T>(a.wd), decay = static_cast<T>(a.decay);
    const T gs = static_cast<T>(a.g_scale), ss = static_cast<T>(a.step_scale);
    // locals: a store through p or buf may not change them, so the loop can be unswitched
    const bool first_dampened = a.first_dampened, has_wd = a.has_wd;
    const bool unit_keep = a.unit_keep, nesterov = a.nesterov;
    for (std::int64_t j = 0; j < n; ++j) {
        T b;
        if (first_dampened) {
            b = g[j] * inv;
            if (has_wd) b = b + p[j] * wd;
        } else {
            b = buf[j] * mom;
            b = unit_keep ? b + g[j] : b + g[j] * ks;
            if (has_wd) b = b + p[j] * kwd;
        }
        buf[j] = b;
        T w = p[j];
        if (nesterov) {
            if (has_wd) w = w * decay;
            w = w - g[j] * gs;
        }
        p[j] = w - b * ss;
    }
}

// Adam / AdamW as nn/optim/adam.py's Adam._apply_one. Scalars:
//   decay = 1 - lr*wd (decoupled decay, applied first when decoupled_wd),
//   inv_scale, wd (L2: g = grad*inv_scale + p*wd; `scaled` says whether g differs from grad),
//   beta1, one_minus_b1, beta2, one_minus_b2,
//   eps_c = eps*sqrt(1-beta2^t), step_c = lr/(1-beta1^t) * sqrt(1-beta2^t).
struct AdamArgs {
    double decay, inv_scale, wd, beta1, one_minus_b1, beta2, one_minus_b2, eps_c, step_c;
    bool decoupled_wd, scaled, has_wd, nesterov;
};

template <typename T>
MTD_INLINE void adam(T* p, const T* grad, T* m, T* v, std::int64_t n, const AdamArgs& a) {
    const T decay = static_cast<T>(a.decay), inv = static_cast<T>(a.inv_scale);
    const T wd = static_cast<T>(a.wd), b1 = static_cast<T>(a.beta1);
    const T c1 = static_cast<T>(a.one_minus_b1), b2 = static_cast<T>(a.beta2);
    const T c2 = static_cast<T>(a.one_minus_b2), eps_c = static_cast<T>(a.eps_c);
    const T step_c = static_cast<T>(a.step_c);
    const bool decoupled_wd = a.decoupled_wd, scaled = a.scaled, has_wd = a.has_wd;
    const bool nesterov = a.nesterov;
    for (std::int64_t j = 0; j < n; ++j) {
        T w = p[j];
        if (decoupled_wd) w = w * decay;
        T g = grad[j];
        if (scaled) {
            g = g * inv;
            if (has_wd) g = g + w * wd;
        }
        const T mj = m[j] * b1 + g * c1;
        const T vj = v[j] * b2 + (g * g) * c2;
        m[j] = mj;
        v[j] = vj;
        const T num = nesterov ? g * c1 + mj * b1 : mj;
        const T q = num / (std::sqrt(vj) + eps_c);
        p[j] = w - q * step_c;
    }
}

// One member's loop, on AVX2 where the CPU has it (same results: IEEE operations either way).
template <typename T>
void sgd_loop_baseline(bool with_buf, T* p, const T* g, T* buf, std::int64_t n,
                       const SgdArgs& a) {
    if (with_buf) heavy_ball(p, g, buf, n, a); else plain_sgd(p, g, n, a);
}

template <typename T>
void adam_loop_baseline(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamArgs& a) {
    adam(p, g, m, v, n, a);
}

#if MTD_HAVE_AVX2
template <typename T>
MTD_AVX2 void sgd_loop_avx2(bool with_buf, T* p, const T* g, T* buf, std::int64_t n,
                            const SgdArgs& a) {
    if (with_buf) heavy_ball(p, g, buf, n, a); else plain_sgd(p, g, n, a);
}

template <typename T>
MTD_AVX2 void adam_loop_avx2(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamArgs& a) {
    adam(p, g, m, v, n, a);
}

#endif

template <typename T>
void sgd_loop(bool with_buf, T* p, const T* g, T* buf, std::int64_t n, const SgdArgs& a) {
#if MTD_HAVE_AVX2
    if (cpu_has_avx2()) return sgd_loop_avx2(with_buf, p, g, buf, n, a);
#endif
    sgd_loop_baseline(with_buf, p, g, buf, n, a);
}

template <typename T>
void adam_loop(T* p, const T* g, T* m, T* v, std::int64_t n, const AdamArgs& a) {
#if MTD_HAVE_AVX2
    if (cpu_has_avx2()) return adam_loop_avx2(p, g, m, v, n, a);
#endif
    adam_loop_baseline(p, g, m, v, n, a);
}

void multi_sgd(const py::sequence& params, const py::sequence& grads, py::object bufs,
               double decay, double g_scale, double momentum, double keep_scale, double keep_wd,
               double inv_scale, double wd, double step_scale, bool has_wd,
               bool first_dampened, bool unit_keep, bool nesterov) {
    std::vector<py::sequence> states;
    if (!bufs.is_none()) states.push_back(bufs.cast<py::sequence>());
    auto members = collect(params, grads, states, {"buf"});
    const SgdArgs a{decay, g_scale, momentum, keep_scale, keep_wd, inv_scale, wd, step_scale,
                    has_wd, first_dampened, unit_keep, nesterov};
    const bool with_buf = !states.empty();
    for_each_member(members, [&](auto tag, Member& mb) {
        using T = decltype(tag);
        sgd_loop(with_buf, data_of<T>(mb.param), cdata_of<T>(mb.grad),
                 with_buf ? data_of<T>(mb.state[0]) : nullptr, mb.size, a);
    });
}

void multi_adam(const py::sequence& params, const py::sequence& grads, const py::sequence& m,
                const py::sequence& v, double decay, double inv_scale, double wd, double beta1,
                double one_minus_b1, double beta2, double one_minus_b2, double eps_c,
                double step_c, bool decoupled_wd, bool scaled, bool has_wd, bool nesterov) {
    auto members = collect(params, grads, {m, v}, {"m", "v"});
    const AdamArgs a{decay, inv_scale, wd, beta1, one_minus_b1, beta2, one_minus_b2,
                     eps_c, step_c, decoupled_wd, scaled, has_wd, nesterov};
    for_each_member(members, [&](auto tag, Member& mb) {
        using T = decltype(tag);
        adam_loop(data_of<T>(mb.param), cdata_of<T>(mb.grad), data_of<T>(mb.state[0]),
                  data_of<T>(mb.state[1]), mb.size, a);
    });
}

}  // namespace

void register_multi_optim(py::module_& m) {
    m.def("multi_sgd", &multi_sgd, py::arg("params"), py::arg("grads"), py::arg("bufs"),
          py::arg("decay"), py::arg("g_scale"), py::arg("momentum"), py::arg("keep_scale"),
          py::arg("keep_wd"), py::arg("inv_scale"), py::arg("wd"), py::arg("step_scale"),
          py::arg("has_wd"), py::arg("first_dampened"), py::arg("unit_keep"),
          py::arg("nesterov"),
          "SGD / momentum step of every param in place (nn/optim/sgd.py's arithmetic).");
    m.def("multi_adam", &multi_adam, py::arg("params"), py::arg("grads"), py::arg("m"),
          py::arg("v"), py::arg("decay"), py::arg("inv_scale"), py::arg("wd"), py::arg("beta1"),
          py::arg("one_minus_b1"), py::arg("beta2"), py::arg("one_minus_b2"), py::arg("eps_c"),
          py::arg("step_c"), py::arg("decoupled_wd"), py::arg("scaled"), py::arg("has_wd"),
          py::arg("nesterov"),
          "Adam / AdamW step of every param in place (nn/optim/adam.py's arithmetic).");
}

}  // namespace mtd

// minitorch_dist._C: the C++ host kernels. Each has a NumPy twin in
// minitorch_dist/kernels/reference.py that serves as test oracle and fallback; the backward
// engine's loops (engine.cpp) have theirs in minitorch_dist/autograd.py.
#include "kernels.h"

PYBIND11_MODULE(_C, m) {
    m.doc() = "minitorch_dist host kernels (C++); see minitorch_dist.kernels for the public API";
    mtd::register_im2col(m);
    mtd::register_rows(m);
    mtd::register_sparse_optim(m);
    mtd::register_selection(m);
    mtd::register_fp16(m);
    mtd::register_winograd(m);
    mtd::register_batchnorm(m);
    mtd::register_multi_optim(m);
    mtd::register_elementwise(m);
    mtd::register_pooling(m);
    mtd::register_engine(m);
}

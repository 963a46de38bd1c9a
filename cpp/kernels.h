// Each kernel family registers its functions on the extension module.
#pragma once

#include <pybind11/pybind11.h>

namespace mtd {

void register_im2col(pybind11::module_& m);
void register_rows(pybind11::module_& m);
void register_sparse_optim(pybind11::module_& m);
void register_selection(pybind11::module_& m);
void register_fp16(pybind11::module_& m);
void register_winograd(pybind11::module_& m);
void register_batchnorm(pybind11::module_& m);
void register_multi_optim(pybind11::module_& m);
void register_elementwise(pybind11::module_& m);
void register_pooling(pybind11::module_& m);
void register_engine(pybind11::module_& m);

}  // namespace mtd

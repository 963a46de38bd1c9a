// Shared helpers for the host kernels: argument checks and dtype dispatch.
//
// The Python wrappers in minitorch_dist/kernels validate user input with friendly messages;
// the checks here are a second line of defence so that calling _C directly can never read or
// write out of bounds.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace py = pybind11;

namespace mtd {

inline std::string shape_str(const py::array& a) {
    std::string s = "(";
    for (py::ssize_t d = 0; d < a.ndim(); ++d) {
        if (d) s += ", ";
        s += std::to_string(a.shape(d));
    }
    if (a.ndim() == 1) s += ",";
    return s + ")";
}

// Throws ValueError unless `a` is C-contiguous with the given number of dimensions.
inline void require_layout(const py::array& a, const char* name, py::ssize_t ndim) {
    if (!(a.flags() & py::array::c_style))
        throw py::value_error(std::string(name) + " must be C-contiguous");
    if (ndim >= 0 && a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must be " + std::to_string(ndim) +
                              "-D, got shape " + shape_str(a));
}

inline void require_writeable(const py::array& a, const char* name) {
    if (!a.writeable()) throw py::value_error(std::string(name) + " must be writeable");
}

template <typename T>
inline bool is_dtype(const py::array& a) {
    return a.dtype().is(py::dtype::of<T>());
}

inline void require_same_dtype(const py::array& a, const py::array& b, const char* an,
                               const char* bn) {
    if (!a.dtype().is(b.dtype()))
        throw py::type_error(std::string(an) + " and " + bn + " must have the same dtype");
}

// Calls fn(T{}) with T = float or double according to the dtype of `a`.
template <typename Fn>
auto dispatch_float(const py::array& a, const char* name, Fn&& fn) {
    if (is_dtype<float>(a)) return fn(float{});
    if (is_dtype<double>(a)) return fn(double{});
    throw py::type_error(std::string(name) + " must be float32 or float64");
}

// Calls fn(I{}) with I = int32_t or int64_t according to the dtype of `ids`.
template <typename Fn>
auto dispatch_index(const py::array& ids, Fn&& fn) {
    if (is_dtype<std::int32_t>(ids)) return fn(std::int32_t{});
    if (is_dtype<std::int64_t>(ids)) return fn(std::int64_t{});
    throw py::type_error("ids must be int32 or int64");
}

template <typename T>
inline T* data_of(py::array& a) {
    return static_cast<T*>(a.mutable_data());
}

template <typename T>
inline const T* cdata_of(const py::array& a) {
    return static_cast<const T*>(a.data());
}

// Scans ids for the first value outside [0, rows); returns its position or -1.
template <typename I>
inline std::int64_t first_bad_id(const I* ids, std::int64_t n, std::int64_t rows) {
    for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t id = static_cast<std::int64_t>(ids[k]);
        if (id < 0 || id >= rows) return k;
    }
    return -1;
}

inline py::index_error bad_id_error(std::int64_t id, std::int64_t rows) {
    return py::index_error("id " + std::to_string(id) + " is out of range for a table of " +
                           std::to_string(rows) + " rows");
}

}  // namespace mtd

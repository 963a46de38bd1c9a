// Python bindings of im2col / col2im (the loops are in im2col_loops.h, and for channels-last
// images in im2col_nhwc.h).
#include "common.h"
#include "im2col_loops.h"
#include "im2col_nhwc.h"
#include "kernels.h"
#include "worker_threads.h"

namespace mtd {
namespace {

using im2col_detail::Geometry;

Geometry make_geometry(std::int64_t N, std::int64_t C, std::int64_t H, std::int64_t W,
                       std::int64_t kh, std::int64_t kw, std::int64_t sh, std::int64_t sw,
                       std::int64_t ph, std::int64_t pw, std::int64_t dh, std::int64_t dw) {
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1)
        throw py::value_error("kernel size, stride and dilation must be >= 1");
    if (ph < 0 || pw < 0) throw py::value_error("padding must be >= 0");
    const std::int64_t span_h = H + 2 * ph - dh * (kh - 1) - 1;
    const std::int64_t span_w = W + 2 * pw - dw * (kw - 1) - 1;
    if (span_h < 0 || span_w < 0)
        throw py::value_error("the dilated kernel is larger than the padded input");
    return Geometry{N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, span_h / sh + 1, span_w / sw + 1};
}

// The checks every entry point makes: ``in`` and ``out`` (one an image, the other the columns)
// laid out and typed alike, the image's geometry ((N, C, H, W), or (N, H, W, C) channels-last)
// and the columns' (rows, row_len) shape.
Geometry checked_geometry(const py::array& in, const char* in_name, const py::array& out,
                          bool image_in, bool channels_last, std::int64_t kh, std::int64_t kw,
                          std::int64_t sh, std::int64_t sw, std::int64_t ph, std::int64_t pw,
                          std::int64_t dh, std::int64_t dw) {
    require_layout(in, in_name, image_in ? 4 : 2);
    require_layout(out, "out", image_in ? 2 : 4);
    require_writeable(out, "out");
    require_same_dtype(in, out, in_name, "out");
    const py::array& image = image_in ? in : out;
    const py::array& cols = image_in ? out : in;
    const char* cols_name = image_in ? "out" : in_name;
    const int c = channels_last ? 3 : 1, h = channels_last ? 1 : 2, w = channels_last ? 2 : 3;
    const Geometry g = make_geometry(image.shape(0), image.shape(c), image.shape(h),
                                     image.shape(w), kh, kw, sh, sw, ph, pw, dh, dw);
    if (cols.shape(0) != g.rows() || cols.shape(1) != g.row_len())
        throw py::value_error(std::string(cols_name) + " has shape " + shape_str(cols) +
                              ", expected (" + std::to_string(g.rows()) + ", " +
                              std::to_string(g.row_len()) + ")");
    return g;
}

void im2col(const py::array& x, py::array& out, std::int64_t kh, std::int64_t kw,
            std::int64_t sh, std::int64_t sw, std::int64_t ph, std::int64_t pw,
            std::int64_t dh, std::int64_t dw) {
    const Geometry g = checked_geometry(x, "x", out, true, false, kh, kw, sh, sw, ph, pw, dh, dw);
    dispatch_float(x, "x", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(x);
        T* dst = data_of<T>(out);
        py::gil_scoped_release nogil;
        im2col_detail::unfold_image(src, dst, g);
    });
}

void col2im(const py::array& cols, py::array& out, std::int64_t kh, std::int64_t kw,
            std::int64_t sh, std::int64_t sw, std::int64_t ph, std::int64_t pw,
            std::int64_t dh, std::int64_t dw) {
    const Geometry g = checked_geometry(cols, "cols", out, false, false, kh, kw, sh, sw, ph, pw,
                                        dh, dw);
    dispatch_float(cols, "cols", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(cols);
        T* dst = data_of<T>(out);
        py::gil_scoped_release nogil;
        im2col_detail::fold_image(src, dst, g);
    });
}

// Workers for a pass over cols: a thread only for every 64x the shared minimum of values,
// 2M values (a copy is light, memory-bound work, and a started thread may wait for a core:
// the MNIST CNN's second layer, 2M values of patches, took 3-4x longer on 2 threads than 1).
int copy_workers(const Geometry& g) {
    return worker_count(g.N, std::max<std::int64_t>(1, g.OH * g.OW * g.row_len() / 64));
}

// Channels-last: x (N, H, W, C) <-> cols (N*OH*OW, kh*kw*C), columns ordered (i, j, c).
void im2col_nhwc(const py::array& x, py::array& out, std::int64_t kh, std::int64_t kw,
                 std::int64_t sh, std::int64_t sw, std::int64_t ph, std::int64_t pw,
                 std::int64_t dh, std::int64_t dw) {
    const Geometry g = checked_geometry(x, "x", out, true, true, kh, kw, sh, sw, ph, pw, dh, dw);
    dispatch_float(x, "x", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(x);
        T* dst = data_of<T>(out);
        py::gil_scoped_release nogil;
        const int workers = copy_workers(g);
        run_blocks(workers, [&](int w) {
            nhwc_detail::unfold(src, dst, g, g.N * w / workers, g.N * (w + 1) / workers);
        });
    });
}

void col2im_nhwc(const py::array& cols, py::array& out, std::int64_t kh, std::int64_t kw,
                 std::int64_t sh, std::int64_t sw, std::int64_t ph, std::int64_t pw,
                 std::int64_t dh, std::int64_t dw) {
    const Geometry g = checked_geometry(cols, "cols", out, false, true, kh, kw, sh, sw, ph, pw,
                                        dh, dw);
    dispatch_float(cols, "cols", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(cols);
        T* dst = data_of<T>(out);
        py::gil_scoped_release nogil;
        const int workers = copy_workers(g);
        run_blocks(workers, [&](int w) {
            nhwc_detail::fold(src, dst, g, g.N * w / workers, g.N * (w + 1) / workers);
        });
    });
}

}  // namespace

void register_im2col(py::module_& m) {
    m.def("im2col_nhwc", &im2col_nhwc, py::arg("x"), py::arg("out"), py::arg("kh"),
          py::arg("kw"), py::arg("sh"), py::arg("sw"), py::arg("ph"), py::arg("pw"),
          py::arg("dh"), py::arg("dw"),
          "Unfold channels-last x (N, H, W, C) into out (N*OH*OW, kh*kw*C), columns (i, j, c).");
    m.def("col2im_nhwc", &col2im_nhwc, py::arg("cols"), py::arg("out"), py::arg("kh"),
          py::arg("kw"), py::arg("sh"), py::arg("sw"), py::arg("ph"), py::arg("pw"),
          py::arg("dh"), py::arg("dw"),
          "Fold cols (N*OH*OW, kh*kw*C) back into channels-last out (N, H, W, C), summing.");
    m.def("im2col", &im2col, py::arg("x"), py::arg("out"), py::arg("kh"), py::arg("kw"),
          py::arg("sh"), py::arg("sw"), py::arg("ph"), py::arg("pw"), py::arg("dh"),
          py::arg("dw"), "Unfold x (N, C, H, W) into out (N*OH*OW, C*kh*kw).");
    m.def("col2im", &col2im, py::arg("cols"), py::arg("out"), py::arg("kh"), py::arg("kw"),
          py::arg("sh"), py::arg("sw"), py::arg("ph"), py::arg("pw"), py::arg("dh"),
          py::arg("dw"), "Fold cols back into out (N, C, H, W), summing overlaps.");
}

}  // namespace mtd

// Winograd F(2x2, 3x3) transforms for 3x3, stride-1 convolutions of channels-last images.
//
// A 3x3 convolution computes each 2x2 output tile from a 4x4 input tile. Winograd's
// minimal filtering (Lavin & Gray, 2015) writes it as
//     Y = A^T [ (G w G^T) (.) (B^T d B) ] A
// so that the channel sums become 16 matrix products (one per point of the 4x4 transformed
// tile) of (tiles x C) by (C x OC): 16 multiply-adds per tile and channel pair where im2col
// does 36. These loops are the transforms around those products (the products themselves
// are BLAS calls, made from Python):
//   input:  V[k][t][c]  = (B^T d_t B)[k]   for the 4x4 tile d_t of image x (zero outside);
//   output: y_t         = A^T M_t A        for M[k][t][o], the 2x2 tile written where it
//                                          lies inside the (N, OH, OW, OC) output;
//   grad:   S[k][t][o]  = (A g_t A^T)[k]   for the 2x2 tile g_t of an output gradient (zero
//                                          outside), used by the weight gradient
//                                          dW = G^T [ sum_t S_t (.) V_t ] G.
// Tiles are numbered t = (n * tiles_h + th) * tiles_w + tw; tile (th, tw) of image n covers
// output rows 2th..2th+1 and input rows 2th-pad..2th-pad+3. Each tile is independent, so
// images are split between worker threads with the same results at any count. The channel
// loops touch 16 (or 4) separate rows; `ivdep` tells GCC they do not overlap, so it
// vectorises them without run-time alias checks.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "worker_threads.h"

// The loops are compiled twice, for AVX2 and for the baseline, and the CPU picks at load
// time (GCC's target_clones): the package is built without -march, so by default the channel
// loops would use 4-wide SSE2. AVX2 without FMA: the arithmetic (adds and subtracts) is the
// same operation by operation, so both clones give the same bits.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MTD_CLONES __attribute__((target_clones("avx2", "default")))
#define MTD_INLINE __attribute__((always_inline)) inline
#else
#define MTD_CLONES
#define MTD_INLINE inline
#endif

namespace mtd {
namespace {

struct Tiles {
    std::int64_t N, H, W, C;   // the tiled image (input for "input", output for the others)
    std::int64_t th, tw;       // tiles per column and per row
    std::int64_t pad;          // input rows/columns before the first tile's origin
    std::int64_t count() const { return N * th * tw; }
};

template <typename T>
MTD_INLINE void input_tiles(const T* x, T* V, const Tiles& g, std::int64_t n0, std::int64_t n1) {
    const std::int64_t C = g.C, T_all = g.count();
    std::vector<T> zero(C, T(0));
    const T* d[4][4];
    for (std::int64_t n = n0; n < n1; ++n) {
        for (std::int64_t a = 0; a < g.th; ++a) {
            for (std::int64_t b = 0; b < g.tw; ++b) {
                const std::int64_t t = (n * g.th + a) * g.tw + b;
                for (int i = 0; i < 4; ++i) {
                    const std::int64_t h = 2 * a - g.pad + i;
                    for (int j = 0; j < 4; ++j) {
                        const std::int64_t w = 2 * b - g.pad + j;
                        d[i][j] = (h >= 0 && h < g.H && w >= 0 && w < g.W)
                                      ? x + ((n * g.H + h) * g.W + w) * C
                                      : zero.data();
                    }
                }
                T* out[16];
                for (int k = 0; k < 16; ++k) out[k] = V + (k * T_all + t) * C;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
                for (std::int64_t c = 0; c < C; ++c) {
                    T r[4][4];  // B^T d: rows
                    for (int j = 0; j < 4; ++j) {
                        const T d0 = d[0][j][c], d1 = d[1][j][c], d2 = d[2][j][c], d3 = d[3][j][c];
                        r[0][j] = d0 - d2;
                        r[1][j] = d1 + d2;
                        r[2][j] = d2 - d1;
                        r[3][j] = d1 - d3;
                    }
                    for (int i = 0; i < 4; ++i) {  // (B^T d) B: columns
                        out[4 * i + 0][c] = r[i][0] - r[i][2];
                        out[4 * i + 1][c] = r[i][1] + r[i][2];
                        out[4 * i + 2][c] = r[i][2] - r[i][1];
                        out[4 * i + 3][c] = r[i][1] - r[i][3];
                    }
                }
            }
        }
    }
}

template <typename T>
MTD_INLINE void output_tiles(const T* M, T* y, const Tiles& g, std::int64_t n0, std::int64_t n1) {
    const std::int64_t C = g.C, T_all = g.count();
    for (std::int64_t n = n0; n < n1; ++n) {
        for (std::int64_t a = 0; a < g.th; ++a) {
            for (std::int64_t b = 0; b < g.tw; ++b) {
                const std::int64_t t = (n * g.th + a) * g.tw + b;
                const T* m[16];
                for (int k = 0; k < 16; ++k) m[k] = M + (k * T_all + t) * C;
                T* dst[2][2];
                bool inside[2][2];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) {
                        const std::int64_t h = 2 * a + i, w = 2 * b + j;
                        inside[i][j] = h < g.H && w < g.W;
                        dst[i][j] = inside[i][j] ? y + ((n * g.H + h) * g.W + w) * C : nullptr;
                    }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
                for (std::int64_t c = 0; c < C; ++c) {
                    T s[2][4];  // A^T m: rows
                    for (int j = 0; j < 4; ++j) {
                        const T m0 = m[j][c], m1 = m[4 + j][c], m2 = m[8 + j][c], m3 = m[12 + j][c];
                        s[0][j] = m0 + m1 + m2;
                        s[1][j] = m1 - m2 - m3;
                    }
                    for (int i = 0; i < 2; ++i) {  // (A^T m) A: columns
                        const T y0 = s[i][0] + s[i][1] + s[i][2];
                        const T y1 = s[i][1] - s[i][2] - s[i][3];
                        if (inside[i][0]) dst[i][0][c] = y0;
                        if (inside[i][1]) dst[i][1][c] = y1;
                    }
                }
            }
        }
    }
}

template <typename T>
MTD_INLINE void grad_tiles(const T* gy, T* S, const Tiles& g, std::int64_t n0, std::int64_t n1) {
    const std::int64_t C = g.C, T_all = g.count();
    std::vector<T> zero(C, T(0));
    for (std::int64_t n = n0; n < n1; ++n) {
        for (std::int64_t a = 0; a < g.th; ++a) {
            for (std::int64_t b = 0; b < g.tw; ++b) {
                const std::int64_t t = (n * g.th + a) * g.tw + b;
                const T* src[2][2];
                for (int i = 0; i < 2; ++i)
                    for (int j = 0; j < 2; ++j) {
                        const std::int64_t h = 2 * a + i, w = 2 * b + j;
                        src[i][j] = (h < g.H && w < g.W) ? gy + ((n * g.H + h) * g.W + w) * C
                                                          : zero.data();
                    }
                T* out[16];
                for (int k = 0; k < 16; ++k) out[k] = S + (k * T_all + t) * C;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC ivdep
#endif
                for (std::int64_t c = 0; c < C; ++c) {
                    T r[4][2];  // A g: rows (A = [[1,0],[1,1],[1,-1],[0,-1]])
                    for (int j = 0; j < 2; ++j) {
                        const T g0 = src[0][j][c], g1 = src[1][j][c];
                        r[0][j] = g0;
                        r[1][j] = g0 + g1;
                        r[2][j] = g0 - g1;
                        r[3][j] = -g1;
                    }
                    for (int i = 0; i < 4; ++i) {  // (A g) A^T: columns
                        out[4 * i + 0][c] = r[i][0];
                        out[4 * i + 1][c] = r[i][0] + r[i][1];
                        out[4 * i + 2][c] = r[i][0] - r[i][1];
                        out[4 * i + 3][c] = -r[i][1];
                    }
                }
            }
        }
    }
}

// One compiled (cloned) function per transform and dtype; each inlines the template.
#define MTD_TRANSFORM(name, T)                                                               \
    MTD_CLONES void name##_##T(const T* s, T* d, const Tiles& g, std::int64_t n0,             \
                               std::int64_t n1) {                                             \
        name<T>(s, d, g, n0, n1);                                                             \
    }
MTD_TRANSFORM(input_tiles, float)
MTD_TRANSFORM(input_tiles, double)
MTD_TRANSFORM(output_tiles, float)
MTD_TRANSFORM(output_tiles, double)
MTD_TRANSFORM(grad_tiles, float)
MTD_TRANSFORM(grad_tiles, double)
#undef MTD_TRANSFORM

void run_input(const float* s, float* d, const Tiles& g, std::int64_t a, std::int64_t b) { input_tiles_float(s, d, g, a, b); }
void run_input(const double* s, double* d, const Tiles& g, std::int64_t a, std::int64_t b) { input_tiles_double(s, d, g, a, b); }
void run_output(const float* s, float* d, const Tiles& g, std::int64_t a, std::int64_t b) { output_tiles_float(s, d, g, a, b); }
void run_output(const double* s, double* d, const Tiles& g, std::int64_t a, std::int64_t b) { output_tiles_double(s, d, g, a, b); }
void run_grad(const float* s, float* d, const Tiles& g, std::int64_t a, std::int64_t b) { grad_tiles_float(s, d, g, a, b); }
void run_grad(const double* s, double* d, const Tiles& g, std::int64_t a, std::int64_t b) { grad_tiles_double(s, d, g, a, b); }

// The images' tiling for a tiled image of shape (N, H, W, C) and tiles_h x tiles_w tiles.
Tiles tiles_of(const py::array& image, std::int64_t tiles_h, std::int64_t tiles_w,
               std::int64_t pad) {
    if (tiles_h < 1 || tiles_w < 1) throw py::value_error("tile counts must be >= 1");
    if (pad < 0) throw py::value_error("pad must be >= 0");
    return Tiles{image.shape(0), image.shape(1), image.shape(2), image.shape(3), tiles_h,
                 tiles_w, pad};
}

void require_tiles(const py::array& tiles, const Tiles& g, const char* name) {
    if (tiles.shape(0) != 16 || tiles.shape(1) != g.count() || tiles.shape(2) != g.C)
        throw py::value_error(std::string(name) + " has shape " + shape_str(tiles) +
                              ", expected (16, " + std::to_string(g.count()) + ", " +
                              std::to_string(g.C) + ")");
}

enum class Kind { kInput, kOutput, kGrad };

// image (N, H, W, C) and tiles (16, N*tiles_h*tiles_w, C); direction given by kind.
void transform(const py::array& src, py::array& dst, std::int64_t tiles_h, std::int64_t tiles_w,
               std::int64_t pad, Kind kind) {
    const bool from_image = kind != Kind::kOutput;
    const py::array& image = from_image ? src : static_cast<const py::array&>(dst);
    const py::array& tiles = from_image ? static_cast<const py::array&>(dst) : src;
    require_layout(image, from_image ? "x" : "out", 4);
    require_layout(tiles, from_image ? "out" : "m", 3);
    require_writeable(dst, "out");
    require_same_dtype(src, dst, "input", "out");
    const Tiles g = tiles_of(image, tiles_h, tiles_w, pad);
    require_tiles(tiles, g, from_image ? "out" : "m");
    if (kind != Kind::kInput && (2 * tiles_h < g.H || 2 * tiles_w < g.W))
        throw py::value_error("the tiles do not cover the output");
    dispatch_float(src, "input", [&](auto tag) {
        using T = decltype(tag);
        const T* s = cdata_of<T>(src);
        T* d = data_of<T>(dst);
        py::gil_scoped_release nogil;
        const int workers = worker_count(g.N, 16 * tiles_h * tiles_w * g.C);
        run_blocks(workers, [&](int w) {
            const std::int64_t n0 = g.N * w / workers, n1 = g.N * (w + 1) / workers;
            if (kind == Kind::kInput) run_input(s, d, g, n0, n1);
            else if (kind == Kind::kOutput) run_output(s, d, g, n0, n1);
            else run_grad(s, d, g, n0, n1);
        });
    });
}

}  // namespace

void register_winograd(py::module_& m) {
    m.def("winograd_input", [](const py::array& x, py::array& out, std::int64_t th,
                               std::int64_t tw, std::int64_t pad) {
              transform(x, out, th, tw, pad, Kind::kInput);
          },
          py::arg("x"), py::arg("out"), py::arg("tiles_h"), py::arg("tiles_w"), py::arg("pad"),
          "out[k, t, c] = (B^T d_t B)[k] for the 4x4 tiles d_t of channels-last x (N, H, W, C) "
          "padded by pad; out is (16, N*tiles_h*tiles_w, C).");
    m.def("winograd_output", [](const py::array& tiles, py::array& out, std::int64_t th,
                                std::int64_t tw) {
              transform(tiles, out, th, tw, 0, Kind::kOutput);
          },
          py::arg("m"), py::arg("out"), py::arg("tiles_h"), py::arg("tiles_w"),
          "out (N, OH, OW, C) = A^T m_t A for the tiles m (16, N*tiles_h*tiles_w, C).");
    m.def("winograd_grad", [](const py::array& gy, py::array& out, std::int64_t th,
                              std::int64_t tw) {
              transform(gy, out, th, tw, 0, Kind::kGrad);
          },
          py::arg("gy"), py::arg("out"), py::arg("tiles_h"), py::arg("tiles_w"),
          "out[k, t, c] = (A g_t A^T)[k] for the 2x2 tiles g_t of channels-last gy (N, OH, OW, C).");
}

}  // namespace mtd

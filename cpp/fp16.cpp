// fp16 pack/unpack for gradient communication ("divide before an fp16 sum").
//
// Conversions round to nearest even, bit-identical to NumPy's astype. On x86 CPUs with F16C
// the float32 paths use the hardware converters (8 values per instruction); everything else
// uses the portable bit-twiddling below.
#include <atomic>
#include <cstring>

#include "common.h"
#include "kernels.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define MTD_F16C 1
#include <immintrin.h>
#endif

namespace mtd {
namespace {

// Rounds an IEEE binary float/double (MANT mantissa bits, exponent bias BIAS) to half bits.
template <typename U, int MANT, int BIAS, typename F>
std::uint16_t to_half_bits(F value) {
    constexpr int kBits = static_cast<int>(sizeof(U) * 8);
    U x;
    std::memcpy(&x, &value, sizeof(U));
    const std::uint16_t sign = static_cast<std::uint16_t>((x >> (kBits - 16)) & 0x8000u);
    const U magnitude = x & ~(U(1) << (kBits - 1));
    const U mant = magnitude & ((U(1) << MANT) - 1);
    const int exp = static_cast<int>(magnitude >> MANT) - BIAS;  // unbiased
    if (exp == BIAS + 1) {  // inf or NaN; NaN keeps its top payload bits, as NumPy does
        if (mant == 0) return sign | 0x7c00u;
        const std::uint16_t payload = static_cast<std::uint16_t>(mant >> (MANT - 10));
        return sign | 0x7c00u | (payload ? payload : 1u);
    }
    if (exp > 15) return sign | 0x7c00u;  // overflow
    // Normal halves keep 10 mantissa bits; subnormal ones (exp < -14) are multiples of 2^-24.
    const U full = exp >= -14 ? mant : (mant | (U(1) << MANT));
    const int shift = exp >= -14 ? MANT - 10 : MANT - 24 - exp;
    if (shift > MANT + 1) return sign;  // below half the smallest subnormal: rounds to zero
    const U kept = full >> shift, rest = full & ((U(1) << shift) - 1);
    const U halfway = U(1) << (shift - 1);
    std::uint32_t bits = static_cast<std::uint32_t>(kept);
    if (exp >= -14) bits += static_cast<std::uint32_t>(exp + 15) << 10;
    if (rest > halfway || (rest == halfway && (kept & 1))) ++bits;  // a carry may reach inf
    return sign | static_cast<std::uint16_t>(bits);
}

inline std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

// float -> half bits; same results as to_half_bits<uint32_t, 23, 127> but with fewer branches.
inline std::uint16_t float_to_half(float f) {
    const std::uint32_t x = bits_of(f) & 0x7fffffffu;
    const std::uint32_t sign = (bits_of(f) >> 16) & 0x8000u;
    std::uint32_t h;
    if (x >= 0x7f800000u) {  // inf or NaN (NaN keeps its top payload bits and stays a NaN)
        const std::uint32_t payload = (x >> 13) & 0x3ffu;
        h = 0x7c00u | (x == 0x7f800000u ? 0u : (payload ? payload : 1u));
    } else if (x >= 0x477ff000u) {  // >= 65520 rounds to inf
        h = 0x7c00u;
    } else if (x >= 0x38800000u) {  // normal half: rebias the exponent, round to nearest even
        h = (x - 0x38000000u + 0xfffu + ((x >> 13) & 1u)) >> 13;
    } else {  // subnormal half or zero: adding 0.5 rounds to a multiple of 2^-24 (RNE)
        h = bits_of(float_of(x) + 0.5f) - bits_of(0.5f);
    }
    return static_cast<std::uint16_t>(sign | h);
}

inline std::uint16_t double_to_half(double d) { return to_half_bits<std::uint64_t, 52, 1023>(d); }

inline float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t magnitude = h & 0x7fffu;
    if (magnitude >= 0x7c00u)  // inf or NaN
        return float_of(sign | 0x7f800000u | ((magnitude & 0x3ffu) << 13));
    if (magnitude >= 0x0400u)  // normal: rebias the exponent
        return float_of(sign | ((magnitude << 13) + 0x38000000u));
    const float subnormal = static_cast<float>(magnitude) * 5.9604644775390625e-8f;  // 2^-24, exact
    return float_of(sign | bits_of(subnormal));
}

#ifdef MTD_F16C
bool cpu_has_f16c() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
}

__attribute__((target("avx,f16c"))) std::int64_t pack_f16c(const float* x, std::uint16_t* out,
                                                            std::int64_t n, float scale) {
    const __m256 s = _mm256_set1_ps(scale);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (scale != 1.0f) v = _mm256_mul_ps(v, s);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;  // the scalar loop finishes the tail
}

__attribute__((target("avx,f16c"))) std::int64_t unpack_f16c(const std::uint16_t* h, float* out,
                                                              std::int64_t n, float scale) {
    const __m256 s = _mm256_set1_ps(scale);
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i)));
        if (scale != 1.0f) v = _mm256_div_ps(v, s);
        _mm256_storeu_ps(out + i, v);
    }
    return i;
}
#endif

const bool kHaveF16C =
#ifdef MTD_F16C
    cpu_has_f16c();
#else
    false;
#endif
std::atomic<bool> use_f16c{kHaveF16C};  // tests switch it off to exercise the portable path

// Sets whether the hardware converters are used (when present); returns the previous value.
bool set_use_f16c(bool on) {
    return use_f16c.exchange(on && kHaveF16C);
}

// Multiplying in the input precision first matches NumPy's (x * scale).astype(float16).
template <typename T>
void pack_loop(const T* x, std::uint16_t* out, std::int64_t n, T scale) {
    std::int64_t i = 0;
#ifdef MTD_F16C
    if constexpr (std::is_same_v<T, float>) {
        if (use_f16c.load(std::memory_order_relaxed)) i = pack_f16c(x, out, n, scale);
    }
#endif
    for (; i < n; ++i) {
        const T v = scale != T(1) ? x[i] * scale : x[i];
        if constexpr (std::is_same_v<T, float>) {
            out[i] = float_to_half(v);
        } else {
            out[i] = double_to_half(v);
        }
    }
}

void unpack_loop(const std::uint16_t* h, float* out, std::int64_t n, float scale) {
    std::int64_t i = 0;
#ifdef MTD_F16C
    if (use_f16c.load(std::memory_order_relaxed)) i = unpack_f16c(h, out, n, scale);
#endif
    for (; i < n; ++i) out[i] = scale != 1.0f ? half_to_float(h[i]) / scale : half_to_float(h[i]);
}

bool is_half(const py::array& a) { return a.dtype().kind() == 'f' && a.itemsize() == 2; }

void check_same_size(const py::array& a, const py::array& b, const char* an, const char* bn) {
    if (a.size() != b.size())
        throw py::value_error(std::string(an) + " has " + std::to_string(a.size()) +
                              " elements but " + bn + " has " + std::to_string(b.size()));
}

void fp16_pack(const py::array& x, py::array& out, double scale) {
    require_layout(x, "x", -1);
    require_layout(out, "out", -1);
    require_writeable(out, "out");
    if (!is_half(out)) throw py::type_error("out must be float16");
    check_same_size(x, out, "x", "out");
    const std::int64_t n = x.size();
    auto* dst = static_cast<std::uint16_t*>(out.mutable_data());
    dispatch_float(x, "x", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(x);
        py::gil_scoped_release nogil;
        pack_loop(src, dst, n, static_cast<T>(scale));
    });
}

void fp16_unpack(const py::array& h, py::array& out, double scale) {
    require_layout(h, "h", -1);
    require_layout(out, "out", -1);
    require_writeable(out, "out");
    if (!is_half(h)) throw py::type_error("h must be float16");
    if (!is_dtype<float>(out)) throw py::type_error("out must be float32");
    check_same_size(h, out, "h", "out");
    const auto* src = static_cast<const std::uint16_t*>(h.data());
    float* dst = data_of<float>(out);
    const std::int64_t n = h.size();
    py::gil_scoped_release nogil;
    unpack_loop(src, dst, n, static_cast<float>(scale));
}

}  // namespace

void register_fp16(py::module_& m) {
    m.def("fp16_pack", &fp16_pack, py::arg("x"), py::arg("out"), py::arg("scale") = 1.0,
          "out = float16(x * scale), x float32 or float64 (same number of elements).");
    m.def("fp16_unpack", &fp16_unpack, py::arg("h"), py::arg("out"), py::arg("scale") = 1.0,
          "out = float32(h) / scale.");
    m.attr("HAVE_F16C") = kHaveF16C;
    m.def("_set_use_f16c", &set_use_f16c, py::arg("on"),
          "Use the F16C converters when present (default True); returns the previous setting.");
}

}  // namespace mtd

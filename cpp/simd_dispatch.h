// Loops compiled twice, for baseline x86-64 and for AVX2 (8 floats a vector, as NumPy's own
// loops use), one picked at run time. AVX2 without FMA: a*b+c stays two roundings, so both
// builds give the same bits (IEEE operations either way).
#pragma once

// a*b+c stays two roundings even where the target has FMA (a build with -march=native): the
// loops of every file that includes this give NumPy's bits
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__GNUC__) && defined(__x86_64__)
#define MTD_INLINE inline __attribute__((always_inline))
#define MTD_AVX2 __attribute__((target("avx2")))
#define MTD_HAVE_AVX2 1
#else
#define MTD_INLINE inline
#define MTD_HAVE_AVX2 0
#endif

namespace mtd {

#if MTD_HAVE_AVX2
inline bool cpu_has_avx2() {
    static const bool has = __builtin_cpu_supports("avx2");
    return has;
}
#endif

}  // namespace mtd

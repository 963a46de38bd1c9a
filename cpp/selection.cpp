// Gradient sparsification: indices of the top-k |values| or of |values| >= threshold.
//
// Both return int64 indices in ascending order, which makes the (indices, values) messages
// of a sparse all-gather deterministic and cache-friendly to scatter back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"

#if defined(__SSE2__) || defined(_M_X64)
#define MTD_SSE2 1
#include <emmintrin.h>
#endif

namespace mtd {
namespace {

// Top-k's candidate scan reads x in blocks of 64: a vectorisable count rejects blocks without
// a hit (most of them when the selection is sparse) and a branch-free loop lists the hits of
// the others, so neither case pays for mispredicted branches. (Threshold selection keeps bit
// masks instead; see below.)
constexpr std::int64_t kBlock = 64;

template <typename T, typename Pred>
int block_hits(const T* block, std::int64_t len, Pred pred) {
    int hits = 0;
    if (len == kBlock) {  // fixed trip count: compiled to vector compares
        for (std::int64_t i = 0; i < kBlock; ++i) hits += pred(block[i]);
    } else {
        for (std::int64_t i = 0; i < len; ++i) hits += pred(block[i]);
    }
    return hits;
}

// Writes the positions start + i of the hits in the block to `hits` (room for kBlock).
template <typename T, typename Pred>
int block_indices(const T* block, std::int64_t start, std::int64_t len, Pred pred,
                  std::int64_t* hits) {
    int found = 0;
    for (std::int64_t i = 0; i < len; ++i) {
        hits[found] = start + i;
        found += pred(block[i]);
    }
    return found;
}

// Sort key of |x|: the IEEE bits without the sign. For non-negative floats the bit pattern
// orders like the value, and NaN (all exponent bits set, non-zero mantissa) sorts above inf,
// so a NaN gradient is always selected, as NumPy's argpartition does.
template <typename T>
struct MagnitudeKey {
    using Key = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    static constexpr int kBucketBits = 16;
    static constexpr int kBucketShift = static_cast<int>(sizeof(Key) * 8) - 1 - kBucketBits;

    static Key of(T x) {
        Key k;
        std::memcpy(&k, &x, sizeof k);
        return k & (~Key(0) >> 1);
    }
};

// Top-k selection in two steps: find a key `bound` with at least k (but not many more) keys
// >= bound, collect those candidates in index order, then pick the k largest among them with
// nth_element. The bound comes from a small strided sample when k is a small fraction of n
// (one read of x in all); if the sample misjudged, a 2^16-bucket histogram of the keys gives
// an exact one.
template <typename T>
class TopK {
  public:
    using Key = typename MagnitudeKey<T>::Key;

    TopK(const T* x, std::int64_t n, std::int64_t k) : x_(x), n_(n), k_(k) {}

    void run(std::int64_t* out) {
        Key bound;
        const std::int64_t cap = 4 * k_ + 4096;  // a sampled bound that lets more in is wrong
        if (!(sampled_bound(bound) && collect(bound, cap))) collect(histogram_bound(), n_);
        select(out);
    }

  private:
    static Key key(T v) { return MagnitudeKey<T>::of(v); }

    bool sampled_bound(Key& bound) const {
        const std::int64_t m = std::min<std::int64_t>(n_, 4096);
        const double expected = static_cast<double>(k_) * m / n_;  // sample hits above k-th
        const auto rank = static_cast<std::int64_t>(expected + 3.0 * std::sqrt(expected) + 4.0);
        if (8 * k_ > n_ || rank >= m) return false;
        std::vector<Key> sample(m);
        for (std::int64_t s = 0; s < m; ++s) sample[s] = key(x_[s * n_ / m]);
        std::nth_element(sample.begin(), sample.end() - rank, sample.end());
        bound = *(sample.end() - rank);
        return true;
    }

    Key histogram_bound() const {
        constexpr int shift = MagnitudeKey<T>::kBucketShift;
        std::vector<std::int64_t> counts(std::size_t(1) << MagnitudeKey<T>::kBucketBits, 0);
        for (std::int64_t i = 0; i < n_; ++i) ++counts[key(x_[i]) >> shift];
        std::size_t bucket = counts.size();
        std::int64_t above = 0;  // keys in the buckets above `bucket`
        while (above + counts[--bucket] < k_) above += counts[bucket];
        return static_cast<Key>(bucket) << shift;  // the smallest key of the k-th's bucket
    }

    // Candidates with key >= bound, in index order; false if fewer than k or more than cap.
    bool collect(Key bound, std::int64_t cap) {
        keys_.clear();
        index_.clear();
        const auto candidate = [bound](T v) { return key(v) >= bound; };
        std::int64_t hits[kBlock];
        for (std::int64_t start = 0; start < n_; start += kBlock) {
            const std::int64_t len = std::min(kBlock, n_ - start);
            if (block_hits(x_ + start, len, candidate) == 0) continue;
            const int found = block_indices(x_ + start, start, len, candidate, hits);
            for (int h = 0; h < found; ++h) {
                keys_.push_back(key(x_[hits[h]]));
                index_.push_back(hits[h]);
            }
            if (static_cast<std::int64_t>(keys_.size()) > cap) return false;
        }
        return static_cast<std::int64_t>(keys_.size()) >= k_;
    }

    // The k largest candidates; of the keys equal to the k-th largest, the first ones.
    void select(std::int64_t* out) const {
        std::vector<Key> sorted_keys(keys_);
        const auto nth = sorted_keys.end() - k_;
        std::nth_element(sorted_keys.begin(), nth, sorted_keys.end());
        const Key kth = *nth;
        std::int64_t ties = k_ - std::count_if(nth + 1, sorted_keys.end(),
                                               [kth](Key k) { return k > kth; });
        std::int64_t filled = 0;
        for (std::size_t c = 0; c < keys_.size() && filled < k_; ++c)
            if (keys_[c] > kth || (keys_[c] == kth && ties-- > 0)) out[filled++] = index_[c];
    }

    const T* x_;
    std::int64_t n_, k_;
    std::vector<Key> keys_;
    std::vector<std::int64_t> index_;
};

py::array_t<std::int64_t> topk_abs(const py::array& flat, std::int64_t k) {
    require_layout(flat, "flat", 1);
    const std::int64_t n = flat.shape(0);
    if (k < 0 || k > n)
        throw py::value_error("k=" + std::to_string(k) + " must be between 0 and the size " +
                              std::to_string(n));
    py::array_t<std::int64_t> out(k);
    std::int64_t* dst = out.mutable_data();
    if (k == n) {
        for (std::int64_t i = 0; i < n; ++i) dst[i] = i;
        return out;
    }
    if (k == 0) return out;
    dispatch_float(flat, "flat", [&](auto tag) {
        using T = decltype(tag);
        const T* x = cdata_of<T>(flat);
        py::gil_scoped_release nogil;
        TopK<T>(x, n, k).run(dst);
    });
    return out;
}

// ---- threshold selection ---------------------------------------------------------------
// Two passes: the first reads x once and keeps one 64-bit hit mask per block of 64 entries
// (n/8 bytes in all), the second reads only the masks and writes the result, allocated at its
// exact size in between. Blocks without a hit cost one compare in the second pass, full ones
// are an iota, and the others list their set bits, so the dense and sparse cases both stay
// near the cost of writing the output.
using HitMask = std::uint64_t;

inline int popcount64(HitMask m) {
#if defined(__GNUC__)
    return __builtin_popcountll(m);
#else
    int c = 0;
    for (; m; m &= m - 1) ++c;
    return c;
#endif
}

inline int lowest_bit(HitMask m) {  // m != 0
#if defined(__GNUC__)
    return __builtin_ctzll(m);
#else
    int i = 0;
    while (!(m & 1)) m >>= 1, ++i;
    return i;
#endif
}

// Bit i set when |block[i]| >= t (NaN never passes, as in NumPy); any len <= kBlock.
template <typename T>
HitMask hit_mask(const T* block, std::int64_t len, T t) {
    HitMask m = 0;
    for (std::int64_t i = 0; i < len; ++i) m |= HitMask(std::abs(block[i]) >= t) << i;
    return m;
}

#if defined(MTD_SSE2)
// A full block with SSE2 (every x86-64 CPU): compare 4 lanes at once and narrow four compare
// results to bytes, so one movemask gathers 16 hit bits; the scalar loop does not vectorise.
inline __m128i abs_ge(__m128 v, __m128 bound) {
    return _mm_castps_si128(_mm_cmpge_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), v), bound));
}

inline __m128i abs_ge(__m128d lo, __m128d hi, __m128d bound) {  // 2 + 2 doubles -> 4 lanes
    const __m128d sign = _mm_set1_pd(-0.0);
    const __m128 a = _mm_castpd_ps(_mm_cmpge_pd(_mm_andnot_pd(sign, lo), bound));
    const __m128 b = _mm_castpd_ps(_mm_cmpge_pd(_mm_andnot_pd(sign, hi), bound));
    return _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
}

inline HitMask bits16(__m128i c0, __m128i c1, __m128i c2, __m128i c3) {
    const __m128i bytes = _mm_packs_epi16(_mm_packs_epi32(c0, c1), _mm_packs_epi32(c2, c3));
    return static_cast<HitMask>(static_cast<unsigned>(_mm_movemask_epi8(bytes)));
}

inline HitMask full_hit_mask(const float* block, float t) {
    const __m128 bound = _mm_set1_ps(t);
    HitMask m = 0;
    for (int j = 0; j < kBlock; j += 16) {
        const float* p = block + j;
        m |= bits16(abs_ge(_mm_loadu_ps(p), bound), abs_ge(_mm_loadu_ps(p + 4), bound),
                    abs_ge(_mm_loadu_ps(p + 8), bound), abs_ge(_mm_loadu_ps(p + 12), bound))
             << j;
    }
    return m;
}

inline HitMask full_hit_mask(const double* block, double t) {
    const __m128d bound = _mm_set1_pd(t);
    HitMask m = 0;
    for (int j = 0; j < kBlock; j += 16) {
        const double* p = block + j;
        __m128i c[4];
        for (int q = 0; q < 4; ++q)
            c[q] = abs_ge(_mm_loadu_pd(p + 4 * q), _mm_loadu_pd(p + 4 * q + 2), bound);
        m |= bits16(c[0], c[1], c[2], c[3]) << j;
    }
    return m;
}
#else
template <typename T>
HitMask full_hit_mask(const T* block, T t) {
    return hit_mask(block, kBlock, t);
}
#endif

// Fills masks (one per block) and returns the number of hits.
template <typename T>
std::int64_t threshold_masks(const T* x, std::int64_t n, T t, HitMask* masks) {
    std::int64_t count = 0, b = 0, start = 0;
    for (; start + kBlock <= n; start += kBlock, ++b) {
        masks[b] = full_hit_mask(x + start, t);
        count += popcount64(masks[b]);
    }
    if (start < n) {
        masks[b] = hit_mask(x + start, n - start, t);
        count += popcount64(masks[b]);
    }
    return count;
}

// Positions of the set bits of every byte value, padded with anything: expanding a byte is
// then 8 unconditional stores (vectorised) and an advance by its popcount, without branches.
struct BytePositions {
    std::int64_t at[256][8];
    BytePositions() {
        for (int v = 0; v < 256; ++v) {
            int k = 0;
            for (int bit = 0; bit < 8; ++bit)
                if (v >> bit & 1) at[v][k++] = bit;
            for (; k < 8; ++k) at[v][k] = 0;
        }
    }
};

// A block with many hits (more than 28 of 64: the measured break-even) is expanded byte by
// byte from the table; one with few by walking its set bits. The table writes up to 8 slots
// past the block's hits, so it is used only while the output has that much room left.
void threshold_fill(const HitMask* masks, std::int64_t blocks, std::int64_t* dst,
                    std::int64_t* end) {
    static const BytePositions table;
    for (std::int64_t b = 0; b < blocks; ++b) {
        HitMask m = masks[b];
        if (m == 0) continue;
        const std::int64_t start = b * kBlock;
        if (m == ~HitMask(0)) {  // only a full block can have all 64 bits set
            for (std::int64_t i = 0; i < kBlock; ++i) dst[i] = start + i;
            dst += kBlock;
            continue;
        }
        const int hits = popcount64(m);
        if (hits > 28 && end - dst >= hits + 8) {
            for (int k = 0; k < 8; ++k) {
                const unsigned byte = static_cast<unsigned>(m >> (8 * k)) & 0xffu;
                const std::int64_t base = start + 8 * k;
                const std::int64_t* pos = table.at[byte];
                for (int j = 0; j < 8; ++j) dst[j] = base + pos[j];
                dst += popcount64(byte);
            }
            continue;
        }
        for (; m; m &= m - 1) *dst++ = start + lowest_bit(m);
    }
}

py::array_t<std::int64_t> threshold_abs(const py::array& flat, double thr) {
    require_layout(flat, "flat", 1);
    const std::int64_t n = flat.shape(0);
    const std::int64_t blocks = (n + kBlock - 1) / kBlock;
    std::unique_ptr<HitMask[]> masks(new HitMask[blocks]);  // every entry is written
    const std::int64_t count = dispatch_float(flat, "flat", [&](auto tag) {
        using T = decltype(tag);
        const T* x = cdata_of<T>(flat);
        py::gil_scoped_release nogil;
        return threshold_masks(x, n, static_cast<T>(thr), masks.get());
    });
    py::array_t<std::int64_t> out(count);
    std::int64_t* dst = out.mutable_data();
    py::gil_scoped_release nogil;
    threshold_fill(masks.get(), blocks, dst, dst + count);
    return out;
}

}  // namespace

void register_selection(py::module_& m) {
    m.def("topk_abs", &topk_abs, py::arg("flat"), py::arg("k"),
          "Ascending int64 indices of the k entries with the largest |value|.");
    m.def("threshold_abs", &threshold_abs, py::arg("flat"), py::arg("thr"),
          "Ascending int64 indices of the entries with |value| >= thr.");
}

}  // namespace mtd

// Gradient sparsification: indices of the top-k |values| or of |values| >= threshold.
//
// Both return int64 indices in ascending order, which makes the (indices, values) messages
// of a sparse all-gather deterministic and cache-friendly to scatter back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace mtd {
namespace {

// Selection scans x in blocks of 64: a vectorisable count rejects blocks without a hit (most
// of them when the selection is sparse) and a branch-free loop lists the hits of the others,
// so neither case pays for mispredicted branches.
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

py::array_t<std::int64_t> threshold_abs(const py::array& flat, double thr) {
    require_layout(flat, "flat", 1);
    const std::int64_t n = flat.shape(0);
    return dispatch_float(flat, "flat", [&](auto tag) {
        using T = decltype(tag);
        const T* x = cdata_of<T>(flat);
        const T t = static_cast<T>(thr);
        const auto selected = [t](T v) { return std::abs(v) >= t; };
        const std::int64_t blocks = (n + kBlock - 1) / kBlock;
        std::vector<std::uint8_t> hits_per_block(blocks);
        std::int64_t count = 0;
        {
            py::gil_scoped_release nogil;
            for (std::int64_t b = 0; b < blocks; ++b) {
                const std::int64_t start = b * kBlock;
                hits_per_block[b] = static_cast<std::uint8_t>(
                    block_hits(x + start, std::min(kBlock, n - start), selected));
                count += hits_per_block[b];
            }
        }
        // Counting first lets the result be written straight into its final array.
        py::array_t<std::int64_t> out(count);
        std::int64_t* dst = out.mutable_data();
        {
            py::gil_scoped_release nogil;
            std::int64_t hits[kBlock];
            for (std::int64_t b = 0; b < blocks; ++b) {
                if (!hits_per_block[b]) continue;
                const std::int64_t start = b * kBlock;
                const int found =
                    block_indices(x + start, start, std::min(kBlock, n - start), selected, hits);
                dst = std::copy(hits, hits + found, dst);
            }
        }
        return out;
    });
}

}  // namespace

void register_selection(py::module_& m) {
    m.def("topk_abs", &topk_abs, py::arg("flat"), py::arg("k"),
          "Ascending int64 indices of the k entries with the largest |value|.");
    m.def("threshold_abs", &threshold_abs, py::arg("flat"), py::arg("thr"),
          "Ascending int64 indices of the entries with |value| >= thr.");
}

}  // namespace mtd

// Groups the positions of duplicate ids so that each distinct row is touched once.
//
// Used by unique_merge and by the sparse optimizers, which must apply one update per row with
// the gradient summed over its duplicates (not one update per duplicate).
//
// The grouping is a stable sort of the positions by id, so the duplicates of an id keep their
// input order and their sums are deterministic. Large inputs use a radix sort (linear in the
// number of ids, whatever the table size); small ones a comparison sort. Both give the same
// order, so results never depend on which one ran.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace mtd {

struct RowGroups {
    std::vector<std::int64_t> ids;     // sorted distinct ids
    std::vector<std::int64_t> order;   // input positions, grouped by id, ascending within a group
    std::vector<std::int64_t> starts;  // group g is order[starts[g] .. starts[g+1])

    // Scratch of the sort, kept with the groups so that a reused RowGroups allocates nothing.
    std::vector<std::uint64_t> keys, spare_keys;
    std::vector<std::int64_t> spare_order;

    std::int64_t size() const { return static_cast<std::int64_t>(ids.size()); }
};

// Below this many ids a comparison sort beats the radix sort's fixed cost (its histograms).
constexpr std::int64_t kRadixMinimum = 2048;

// The radix sort's digits have at most this many bits: 2048 counters stay in the L1 cache.
constexpr int kMaxDigitBits = 11;

// Sorts g.keys (ids minus the smallest id), carrying g.order along, by a least-significant-
// digit radix sort: each pass is a stable counting sort on the next digit, so positions that
// start ascending stay ascending among equal keys. Only the bits the id range needs are
// sorted on (24 for a table of 10M rows: three passes of 8 bits).
inline void radix_sort_keys(RowGroups& g, std::uint64_t range) {
    const std::int64_t n = static_cast<std::int64_t>(g.keys.size());
    int bits = 0;
    while (bits < 64 && (range >> bits) != 0) ++bits;
    const int passes = (bits + kMaxDigitBits - 1) / kMaxDigitBits;
    if (passes == 0) return;  // one distinct id: already in position order
    const int digit_bits = (bits + passes - 1) / passes;
    const std::uint64_t mask = (std::uint64_t{1} << digit_bits) - 1;
    const std::size_t buckets = std::size_t{1} << digit_bits;
    g.spare_keys.resize(n);
    g.spare_order.resize(n);
    // One read of the keys fills the histograms of every pass.
    std::vector<std::int64_t> count(buckets * passes, 0);
    for (std::int64_t k = 0; k < n; ++k)
        for (int p = 0; p < passes; ++p)
            ++count[p * buckets + ((g.keys[k] >> (p * digit_bits)) & mask)];
    for (int p = 0; p < passes; ++p) {
        std::int64_t* c = count.data() + p * buckets;
        std::int64_t sum = 0;
        for (std::size_t j = 0; j < buckets; ++j) {
            const std::int64_t here = c[j];
            c[j] = sum;
            sum += here;
        }
        const int shift = p * digit_bits;
        const std::uint64_t* key = g.keys.data();
        const std::int64_t* pos = g.order.data();
        std::uint64_t* key_out = g.spare_keys.data();
        std::int64_t* pos_out = g.spare_order.data();
        for (std::int64_t k = 0; k < n; ++k) {
            const std::int64_t to = c[(key[k] >> shift) & mask]++;
            key_out[to] = key[k];
            pos_out[to] = pos[k];
        }
        g.keys.swap(g.spare_keys);
        g.order.swap(g.spare_order);
    }
}

// Fills `g` with the groups of ids[0..n), reusing its memory.
template <typename I>
void group_rows(const I* ids, std::int64_t n, RowGroups& g) {
    g.ids.clear();
    g.starts.clear();
    g.order.resize(n);
    const bool already_unique_sorted = [&] {
        for (std::int64_t k = 1; k < n; ++k)
            if (!(ids[k - 1] < ids[k])) return false;
        return true;
    }();
    if (already_unique_sorted) {  // the common case for gradients that were merged upstream
        g.ids.assign(ids, ids + n);
        g.starts.resize(n + 1);
        for (std::int64_t k = 0; k <= n; ++k) {
            if (k < n) g.order[k] = k;
            g.starts[k] = k;
        }
        return;
    }
    std::int64_t lo = static_cast<std::int64_t>(ids[0]), hi = lo;
    for (std::int64_t k = 1; k < n; ++k) {
        lo = std::min<std::int64_t>(lo, ids[k]);
        hi = std::max<std::int64_t>(hi, ids[k]);
    }
    auto offset = [lo](std::int64_t id) {  // id - lo, without signed overflow
        return static_cast<std::uint64_t>(id) - static_cast<std::uint64_t>(lo);
    };
    g.keys.resize(n);
    for (std::int64_t k = 0; k < n; ++k) {
        g.keys[k] = offset(ids[k]);
        g.order[k] = k;
    }
    if (n < kRadixMinimum) {
        std::vector<std::pair<std::uint64_t, std::int64_t>> pairs(n);
        for (std::int64_t k = 0; k < n; ++k) pairs[k] = {g.keys[k], k};
        std::sort(pairs.begin(), pairs.end());  // by key, then position: the same stable order
        for (std::int64_t k = 0; k < n; ++k) {
            g.keys[k] = pairs[k].first;
            g.order[k] = pairs[k].second;
        }
    } else {
        radix_sort_keys(g, offset(hi));
    }
    for (std::int64_t k = 0; k < n; ++k) {
        if (k == 0 || g.keys[k] != g.keys[k - 1]) {
            g.ids.push_back(static_cast<std::int64_t>(g.keys[k] + static_cast<std::uint64_t>(lo)));
            g.starts.push_back(k);
        }
    }
    g.starts.push_back(n);
}

// Frees the memory of `g` if it holds more than `keep_bytes`.
inline void release_if_large(RowGroups& g, std::size_t keep_bytes) {
    const std::size_t bytes = 8 * (g.ids.capacity() + g.order.capacity() + g.starts.capacity() +
                                   g.keys.capacity() + g.spare_keys.capacity() +
                                   g.spare_order.capacity());
    if (bytes > keep_bytes) g = RowGroups();
}

// The calling thread's RowGroups, lent for the life of this object and reused from one call
// to the next. A fresh block of a few MiB is new memory from the system each time (glibc
// maps large blocks anew and unmaps them when freed), and faulting its pages in cost more
// than the sort itself; reused, they stay mapped. A nested call on the same thread (Python
// code run while the lender holds the GIL) gets a fresh RowGroups instead. On return, scratch
// beyond 64 MiB is freed: one huge call does not pin its memory for the life of the thread.
class ThreadRowGroups {
  public:
    ThreadRowGroups() : shared_(!slot().busy) {
        if (shared_) slot().busy = true;
    }
    ~ThreadRowGroups() {
        if (!shared_) return;
        release_if_large(slot().groups, std::size_t{64} << 20);
        slot().busy = false;
    }
    ThreadRowGroups(const ThreadRowGroups&) = delete;
    ThreadRowGroups& operator=(const ThreadRowGroups&) = delete;

    RowGroups& get() { return shared_ ? slot().groups : own_; }

  private:
    struct Slot {
        RowGroups groups;
        bool busy = false;
    };
    static Slot& slot() {
        thread_local Slot s;
        return s;
    }
    bool shared_;
    RowGroups own_;
};

// The first group of block `w` of `workers` contiguous blocks of groups. The blocks balance
// distinct rows plus ids (a hot id's group holds thousands of ids to sum, so an even split of
// the groups alone leaves one thread with most of the work).
inline std::int64_t block_start(const RowGroups& g, int w, int workers) {
    const std::int64_t count = g.size();
    if (w <= 0) return 0;
    if (w >= workers) return count;
    const std::int64_t total = g.starts[count] + count;
    const std::int64_t target = total / workers * w + total % workers * w / workers;
    std::int64_t lo = 0, hi = count;  // smallest grp with starts[grp] + grp >= target
    while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo) / 2;
        if (g.starts[mid] + mid < target) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// Row of the summed values of group `grp`; points into `values` when the group has one member,
// else into `scratch` (of length d).
template <typename T>
const T* group_sum(const RowGroups& g, std::int64_t grp, const T* values, std::int64_t d,
                   T* scratch) {
    const std::int64_t begin = g.starts[grp], end = g.starts[grp + 1];
    const T* first = values + g.order[begin] * d;
    if (end - begin == 1) return first;
    std::copy(first, first + d, scratch);
    for (std::int64_t k = begin + 1; k < end; ++k) {
        const T* row = values + g.order[k] * d;
        for (std::int64_t j = 0; j < d; ++j) scratch[j] += row[j];
    }
    return scratch;
}

}  // namespace mtd

// Groups the positions of duplicate ids so that each distinct row is touched once.
//
// Used by unique_merge and by the sparse optimizers, which must apply one update per row with
// the gradient summed over its duplicates (not one update per duplicate).
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

    std::int64_t size() const { return static_cast<std::int64_t>(ids.size()); }
};

template <typename I>
RowGroups group_rows(const I* ids, std::int64_t n) {
    RowGroups g;
    g.order.resize(n);
    g.starts.reserve(n + 1);
    const bool already_unique_sorted = [&] {
        for (std::int64_t k = 1; k < n; ++k)
            if (!(ids[k - 1] < ids[k])) return false;
        return true;
    }();
    if (already_unique_sorted) {  // the common case for gradients that were merged upstream
        g.ids.assign(ids, ids + n);
        for (std::int64_t k = 0; k < n; ++k) {
            g.order[k] = k;
            g.starts.push_back(k);
        }
        g.starts.push_back(n);
        return g;
    }
    // Sorting (id, position) pairs keeps duplicates in input order, so sums are deterministic.
    std::vector<std::pair<std::int64_t, std::int64_t>> pairs(n);
    for (std::int64_t k = 0; k < n; ++k) pairs[k] = {static_cast<std::int64_t>(ids[k]), k};
    std::sort(pairs.begin(), pairs.end());
    for (std::int64_t k = 0; k < n; ++k) {
        if (k == 0 || pairs[k].first != pairs[k - 1].first) {
            g.ids.push_back(pairs[k].first);
            g.starts.push_back(k);
        }
        g.order[k] = pairs[k].second;
    }
    g.starts.push_back(n);
    return g;
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

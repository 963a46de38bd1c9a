// Row kernels for embedding tables: gather, scatter-add and duplicate merge.
//
// Tables arrive as 2-D (rows, d) views; the Python wrapper flattens trailing dimensions and
// ids of any shape, so these loops only deal with rows of d contiguous values. A large gather
// splits the ids over worker threads (see worker_threads.h) and prefetches the table rows a
// few ids ahead: the rows of a big table are cache misses, and waiting on them one at a time
// was most of its cost.
#include <cstring>

#include "common.h"
#include "kernels.h"
#include "row_groups.h"
#include "worker_threads.h"

namespace mtd {
namespace {

// How many ids ahead the gather prefetches table rows.
constexpr std::int64_t kPrefetchRows = 16;

void check_rows(const py::array& ids, const py::array& values, std::int64_t d) {
    require_layout(ids, "ids", 1);
    require_layout(values, "values", 2);
    if (values.shape(0) != ids.shape(0) || values.shape(1) != d)
        throw py::value_error("values has shape " + shape_str(values) + ", expected (" +
                              std::to_string(ids.shape(0)) + ", " + std::to_string(d) + ")");
}

void embedding_gather(const py::array& table, const py::array& ids, py::array& out) {
    require_layout(table, "table", 2);
    require_writeable(out, "out");
    require_same_dtype(table, out, "table", "out");
    check_rows(ids, out, table.shape(1));
    const std::int64_t rows = table.shape(0), d = table.shape(1), n = ids.shape(0);
    const std::size_t row_bytes = static_cast<std::size_t>(d) * table.itemsize();
    const char* src = static_cast<const char*>(table.data());
    char* dst = static_cast<char*>(out.mutable_data());
    std::int64_t bad = -1, bad_pos = -1;
    dispatch_index(ids, [&](auto tag) {
        using I = decltype(tag);
        const I* idx = cdata_of<I>(ids);
        {
            py::gil_scoped_release nogil;
            bad_pos = first_bad_id(idx, n, rows);
            if (bad_pos < 0) {
                // Ids in blocks, one per worker; each block asks for the table rows a few ids
                // ahead (a large table's rows are cache and TLB misses).
                const int workers = worker_count(n, d);
                run_blocks(workers, [&](int w) {
                    const std::int64_t begin = n * w / workers, end = n * (w + 1) / workers;
                    for (std::int64_t k = begin; k < end; ++k) {
                        if (k + kPrefetchRows < end)
                            prefetch_row<false>(
                                src + static_cast<std::int64_t>(idx[k + kPrefetchRows]) * row_bytes,
                                row_bytes);
                        const std::int64_t row = static_cast<std::int64_t>(idx[k]);
                        std::memcpy(dst + k * row_bytes, src + row * row_bytes, row_bytes);
                    }
                });
            }
        }
        if (bad_pos >= 0) bad = static_cast<std::int64_t>(idx[bad_pos]);
    });
    if (bad_pos >= 0) throw bad_id_error(bad, rows);
}

template <typename T, typename I>
std::int64_t scatter_add_loop(T* target, std::int64_t rows, std::int64_t d, const I* idx,
                              std::int64_t n, const T* values) {
    const std::int64_t b = first_bad_id(idx, n, rows);
    if (b >= 0) return b;
    for (std::int64_t k = 0; k < n; ++k) {
        T* dst = target + static_cast<std::int64_t>(idx[k]) * d;
        const T* src = values + k * d;
        for (std::int64_t j = 0; j < d; ++j) dst[j] += src[j];
    }
    return -1;
}

void scatter_add_rows(py::array& target, const py::array& ids, const py::array& values) {
    require_layout(target, "target", 2);
    require_writeable(target, "target");
    require_same_dtype(target, values, "target", "values");
    check_rows(ids, values, target.shape(1));
    const std::int64_t rows = target.shape(0), d = target.shape(1), n = ids.shape(0);
    std::int64_t bad = -1, bad_pos = -1;
    dispatch_float(target, "target", [&](auto ttag) {
        using T = decltype(ttag);
        dispatch_index(ids, [&](auto itag) {
            using I = decltype(itag);
            const I* idx = cdata_of<I>(ids);
            T* dst = data_of<T>(target);
            const T* src = cdata_of<T>(values);
            {
                py::gil_scoped_release nogil;
                bad_pos = scatter_add_loop(dst, rows, d, idx, n, src);
            }
            if (bad_pos >= 0) bad = static_cast<std::int64_t>(idx[bad_pos]);
        });
    });
    if (bad_pos >= 0) throw bad_id_error(bad, rows);
}

py::tuple unique_merge(const py::array& ids, const py::array& values) {
    require_layout(ids, "ids", 1);
    require_layout(values, "values", 2);
    if (values.shape(0) != ids.shape(0))
        throw py::value_error("values has " + std::to_string(values.shape(0)) +
                              " rows but there are " + std::to_string(ids.shape(0)) + " ids");
    const std::int64_t n = ids.shape(0), d = values.shape(1);
    ThreadRowGroups lease;
    RowGroups& groups = lease.get();
    dispatch_index(ids, [&](auto tag) {
        using I = decltype(tag);
        const I* idx = cdata_of<I>(ids);
        py::gil_scoped_release nogil;
        group_rows(idx, n, groups);
    });
    const std::int64_t m = groups.size();
    py::array_t<std::int64_t> out_ids(m);
    py::array out_values(values.dtype(), std::vector<py::ssize_t>{m, d});
    std::memcpy(out_ids.mutable_data(), groups.ids.data(), sizeof(std::int64_t) * m);
    dispatch_float(values, "values", [&](auto tag) {
        using T = decltype(tag);
        const T* src = cdata_of<T>(values);
        T* dst = data_of<T>(out_values);
        py::gil_scoped_release nogil;
        const std::size_t row_bytes = sizeof(T) * static_cast<std::size_t>(d);
        for (std::int64_t g = 0; g < m; ++g) {
            if (g + kPrefetchRows < m)
                prefetch_row<false>(src + groups.order[groups.starts[g + kPrefetchRows]] * d,
                                    row_bytes);
            T* row = dst + g * d;
            const T* sum = group_sum(groups, g, src, d, row);
            if (sum != row) std::copy(sum, sum + d, row);
        }
    });
    return py::make_tuple(out_ids, out_values);
}

}  // namespace

void register_rows(py::module_& m) {
    m.def("embedding_gather", &embedding_gather, py::arg("table"), py::arg("ids"),
          py::arg("out"), "out[k] = table[ids[k]] for 1-D ids; raises IndexError on a bad id.");
    m.def("scatter_add_rows", &scatter_add_rows, py::arg("target"), py::arg("ids"),
          py::arg("values"), "target[ids[k]] += values[k] in place; duplicates add up.");
    m.def("unique_merge", &unique_merge, py::arg("ids"), py::arg("values"),
          "(sorted distinct ids as int64, values summed per distinct id).");
}

}  // namespace mtd

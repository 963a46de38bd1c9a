// Worker threads for the host row loops (sparse optimizer updates, embedding gather).
//
// A loop over independent rows is cut into contiguous blocks, one per worker; each row is
// computed by the same code whatever the block, so results do not depend on the count.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace mtd {

// Most worker threads a row loop may use; 0 means one per hardware thread (capped at 16).
inline std::atomic<int> max_threads{0};

// Below this many elements per thread, starting a thread costs more than it saves.
constexpr std::int64_t kMinElementsPerThread = 1 << 15;

// Workers for a loop over `rows` rows of `d` elements.
inline int worker_count(std::int64_t rows, std::int64_t d) {
    int limit = max_threads.load();
    if (limit <= 0)
        limit = static_cast<int>(std::min(16u, std::max(1u, std::thread::hardware_concurrency())));
    const std::int64_t by_work = rows * d / kMinElementsPerThread;
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(limit, by_work)));
}

// Runs block(w) for every w in [0, workers): blocks 1.. on new threads, block 0 on this one.
// If a thread cannot be started, this thread runs the blocks left over. `block` must not throw.
template <typename Block>
void run_blocks(int workers, Block&& block) {
    if (workers <= 1) {
        block(0);
        return;
    }
    std::vector<std::thread> pool;
    int started = 1;
    try {
        pool.reserve(workers - 1);
        for (; started < workers; ++started) pool.emplace_back(block, started);
    } catch (...) {  // no thread to be had: this thread does the remaining blocks
    }
    for (int w = started; w < workers; ++w) block(w);
    block(0);
    for (auto& t : pool) t.join();
}

// Asks for the first and the last cache line of the row starting at `p`, `bytes` long: all of
// a row of up to 64 bytes however it straddles lines, and of up to 128 bytes that starts on a
// line (the hardware streams the rest of a longer one). The rows of a large table are
// scattered over memory, so nearly every row is a cache and TLB miss; asking a few rows ahead
// overlaps those misses instead of waiting on each. kWrite: the row is about to be written.
// Check the disassembly after changing this: GCC 12 silently drops the prefetches of some
// variants (one with a third, conditional line; one looping over the lines).
template <bool kWrite>
inline void prefetch_row(const void* p, std::size_t bytes) {
#if defined(__GNUC__) || defined(__clang__)
    if (bytes == 0) return;
    const char* c = static_cast<const char*>(p);
    __builtin_prefetch(c, kWrite ? 1 : 0, 3);
    __builtin_prefetch(c + bytes - 1, kWrite ? 1 : 0, 3);
#else
    (void)p;
    (void)bytes;
#endif
}

}  // namespace mtd

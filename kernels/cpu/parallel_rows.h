// Independent outputs of a CPU reference op split over threads. Threads only partition the
// outputs into contiguous ranges: every output is computed by the same sequence of
// operations as on one thread, on one thread, so the results are bit-identical to a serial
// run whatever the thread count (Law 4 holds for the reference as for the kernels).
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace dsv4 {

// The threads a top-level CPU op may use: DSV4_CPU_THREADS when set (an integer >= 1; 1
// runs everything on the calling thread), else std::thread::hardware_concurrency(); at
// most kMaxCpuThreads.
inline constexpr int kMaxCpuThreads = 64;
int cpu_threads();

namespace detail {
// The threads the calling thread may still split into: 0 at the top level (cpu_threads()),
// inside a parallel_rows worker its share of the parent's threads, so a nested call (a
// row of cpu_moe running its linears) splits only over threads no other worker holds.
inline thread_local int cpu_thread_share = 0;
// Items below this many multiply-adds a thread stay on the calling thread (starting a
// thread costs ~10-50 us, ~1e5 multiply-adds).
inline constexpr int64_t kMinCostPerThread = int64_t{1} << 19;
}  // namespace detail

// Runs fn(begin, end) over contiguous ranges covering [0, n), one thread each (the caller
// runs the first): min(threads available, n, n * cost_per_item / kMinCostPerThread) ranges,
// at least one. cost_per_item: the rough multiply-adds of one item. fn must write only
// the outputs of its items and read nothing another range writes. An exception of a range
// is rethrown once all threads have joined, the lowest range's first, so the caller sees
// the error a serial run would have thrown first.
template <class F>
void parallel_rows(int64_t n, int64_t cost_per_item, const F& fn) {
  if (n <= 0) return;
  const int avail = detail::cpu_thread_share > 0 ? detail::cpu_thread_share : cpu_threads();
  const int64_t by_cost = std::max<int64_t>(1, n * std::max<int64_t>(cost_per_item, 1) /
                                                   detail::kMinCostPerThread);
  const int parts = static_cast<int>(std::min<int64_t>({avail, n, by_cost}));
  if (parts <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::exception_ptr> errors(parts);
  auto run = [&](int p) {
    detail::cpu_thread_share = avail / parts + (p < avail % parts ? 1 : 0);
    try {
      fn(n * p / parts, n * (p + 1) / parts);
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    workers.reserve(parts - 1);
    for (int p = 1; p < parts; ++p) workers.emplace_back(run, p);
    const int own = detail::cpu_thread_share;
    run(0);
    detail::cpu_thread_share = own;
  }  // joins
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace dsv4

// parallel_rows (kernels/cpu/parallel_rows.h): contiguous ranges covering every item once,
// a worker's exception reaching the caller, DSV4_CPU_THREADS checked; and the threaded CPU
// linears, sink attention and indexer bit-identical to their one-thread runs at shapes that
// split into several ranges (the MoE's case is in test_expert_vectors.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "base/error.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/indexer.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel_rows.h"
#include "tests/test_views.h"
#include "cpu_threads_env.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

constexpr int64_t kBig = int64_t{1} << 30;  // a per-item cost that always splits

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("parallel_rows: contiguous ranges cover [0, n) once; small work stays on the caller") {
  for (const int threads : {1, 2, 3, 8}) {
    for (const int64_t n : {1, 2, 7, 64, 1000}) {
      CAPTURE(threads);
      CAPTURE(n);
      std::mutex m;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      with_cpu_threads(threads, [&] {
        parallel_rows(n, kBig, [&](int64_t b, int64_t e) {
          std::lock_guard lock(m);
          ranges.push_back({b, e});
        });
        return 0;
      });
      std::sort(ranges.begin(), ranges.end());
      CHECK(ranges.size() == static_cast<size_t>(std::min<int64_t>(threads, n)));
      int64_t next = 0;
      for (const auto& [b, e] : ranges) {
        CHECK(b == next);
        CHECK(e > b);
        next = e;
      }
      CHECK(next == n);
    }
  }
  // 100 items of 10 multiply-adds: one range, on the calling thread.
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  with_cpu_threads(8, [&] {
    parallel_rows(100, 10, [&](int64_t b, int64_t e) {
      ++calls;
      CHECK(b == 0);
      CHECK(e == 100);
      CHECK(std::this_thread::get_id() == caller);
    });
    return 0;
  });
  CHECK(calls == 1);
}

TEST_CASE("parallel_rows: a nested call splits only over its worker's share of the threads") {
  std::mutex m;
  std::vector<int64_t> inner_ranges;  // per outer item: how many ranges its inner call made
  with_cpu_threads(8, [&] {
    parallel_rows(3, kBig, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        std::atomic<int64_t> count = 0;
        parallel_rows(100, kBig, [&](int64_t, int64_t) { ++count; });
        std::lock_guard lock(m);
        inner_ranges.push_back(count);
      }
    });
    return 0;
  });
  std::sort(inner_ranges.begin(), inner_ranges.end());
  CHECK(inner_ranges == std::vector<int64_t>{2, 3, 3});  // 8 threads = 3 + 3 + 2
}

TEST_CASE("parallel_rows: a worker's exception reaches the caller, the lowest range's first") {
  with_cpu_threads(4, [&] {
    // 8 items in 4 ranges [0,2) [2,4) [4,6) [6,8); ranges from 2 on throw.
    CHECK_THROWS_WITH_AS(parallel_rows(8, kBig, [](int64_t b, int64_t) {
                           if (b >= 2) throw Error(cat("range at ", b));
                         }),
                         "range at 2", Error);
    CHECK_THROWS_WITH_AS(parallel_rows(8, kBig, [](int64_t b, int64_t) {
                           if (b == 0 || b == 6) throw Error(cat("range at ", b));
                         }),
                         "range at 0", Error);
    return 0;
  });
  for (const char* bad : {"0", "-2", "four", "3x"}) {
    CAPTURE(bad);
    setenv("DSV4_CPU_THREADS", bad, 1);
    CHECK_THROWS_WITH_AS(cpu_threads(), doctest::Contains("DSV4_CPU_THREADS"), Error);
  }
  unsetenv("DSV4_CPU_THREADS");
  CHECK(cpu_threads() >= 1);
}

TEST_CASE("threaded L-bf16 and L-island linears equal their one-thread runs bit for bit") {
  const int rows = 3;
  const int64_t out = 701, in = 2048;  // 701 outputs: ranges of unequal length
  const std::vector<float> w = random_uniform(static_cast<size_t>(out * in), 11, -1, 1);
  const std::vector<float> x = random_uniform(static_cast<size_t>(rows * in), 12, -4, 4);
  const std::vector<uint8_t> w_bytes = f32_bytes(w);
  const TensorView wv = byte_view("attn.island.weight", DType::F32, {out, in}, w_bytes);
  for (const bool act_bf16 : {false, true}) {
    auto lbf16 = [&] {
      std::vector<float> y(static_cast<size_t>(rows * out));
      cpu_lbf16(w.data(), out, in, x.data(), in, rows, act_bf16, y.data(), out);
      return y;
    };
    const std::vector<float> serial = with_cpu_threads(1, lbf16);
    for (const int threads : {2, 3, 8}) {
      CAPTURE(threads);
      CHECK(same_bits(with_cpu_threads(threads, lbf16), serial));
    }
  }
  CpuWeightCache cache;
  auto island = [&] {
    std::vector<float> y(static_cast<size_t>(rows * out));
    cpu_linear_island(cache, wv, x.data(), rows, y.data());
    return y;
  };
  const std::vector<float> serial = with_cpu_threads(1, island);
  for (const int threads : {2, 3, 8}) {
    CAPTURE(threads);
    CHECK(same_bits(with_cpu_threads(threads, island), serial));
  }
}

TEST_CASE("threaded sink attention and indexer scores equal their one-thread runs bit for bit") {
  const int rows = 3, heads = 8, dim = 128, width = 640, n_kv = 900;
  const std::vector<float> q = random_uniform(static_cast<size_t>(rows) * heads * dim, 21, -1, 1);
  const std::vector<float> kv = random_uniform(static_cast<size_t>(n_kv) * dim, 22, -1, 1);
  std::vector<int32_t> idx(static_cast<size_t>(rows) * width);
  for (size_t i = 0; i < idx.size(); ++i)  // every 7th slot a -1 pad
    idx[i] = i % 7 == 3 ? -1 : static_cast<int32_t>((i * 37) % n_kv);
  const std::vector<uint8_t> sink_bytes = f32_bytes(random_uniform(heads, 23, -2, 2));
  const TensorView sink = byte_view("attn.attn_sink", DType::F32, {heads}, sink_bytes);
  auto attention = [&] {
    std::vector<float> o(q.size());
    cpu_sink_attention(q.data(), rows, heads, dim, kv.data(), idx.data(), width, sink, 0.088f,
                       o.data());
    return o;
  };
  const std::vector<float> serial = with_cpu_threads(1, attention);
  for (const int threads : {2, 3, 8}) {
    CAPTURE(threads);
    CHECK(same_bits(with_cpu_threads(threads, attention), serial));
  }

  const int iheads = 16, idim = 128, keys = 3001, keep = 100;
  const std::vector<float> iq = random_uniform(static_cast<size_t>(rows) * iheads * idim, 24, -1, 1);
  const std::vector<float> iw = random_uniform(static_cast<size_t>(rows) * iheads, 25, -1, 1);
  const std::vector<float> ikeys = random_uniform(static_cast<size_t>(keys) * idim, 26, -1, 1);
  const int32_t n_visible[rows] = {keys, 1500, 77};
  auto topk = [&] {
    std::vector<int32_t> out(static_cast<size_t>(rows) * keep);
    cpu_indexer_topk(iq.data(), iw.data(), rows, iheads, idim, 0.25f, ikeys.data(), n_visible,
                     keep, 5, out.data(), keep, 0);
    return out;
  };
  auto scores = [&] {
    std::vector<float> s(keys);
    cpu_indexer_scores(iq.data(), iw.data(), iheads, idim, 0.25f, ikeys.data(), keys, s.data());
    return s;
  };
  const std::vector<int32_t> serial_topk = with_cpu_threads(1, topk);
  const std::vector<float> serial_scores = with_cpu_threads(1, scores);
  for (const int threads : {2, 3, 8}) {
    CAPTURE(threads);
    CHECK(with_cpu_threads(threads, topk) == serial_topk);
    CHECK(same_bits(with_cpu_threads(threads, scores), serial_scores));
  }
}

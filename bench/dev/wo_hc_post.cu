// dsv4-dev-wo-hc-post: the decode step's attention exit (MODEL.md §4.21 step 4, §5 line 5)
// at the Flash shapes — wo_b [4096, 8192] FP8, hc 4 — at 1-4 rows (a decode row, verify
// rounds), llm.c dev/cuda style. "pair" is the reference, linear_fp8 then hc_post (two
// launches, what the step ran before); "fused" is linear_fp8_hc_post (one launch: the
// GEMV's store writes hc_post's columns, kernels/cuda/gemv_args.cuh store_y). Each variant
// runs as a captured step graph (Ops::run_step, PDL on, as the engine) of kLinks links — a
// layer's wo_b each, kWeights distinct weights in turn (128 MiB, beyond the 50 MB L2) —
// replayed `reps` times. Printed per row count and variant: us per link (the graph's wall
// time over the links), and for fused "=pair" when every link's y and h equal the pair's
// bit for bit (else "DIFFERS"). The fused saving is one launch's latency per link (~3 us
// in ncu: hc_post_kernel at 1 row), 43 links a decode step.
// usage: dsv4-dev-wo-hc-post [reps (50)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/dev/dev_bench.h"
#include "kernels/ops.h"
#include "tests/test_views.h"

namespace {

using namespace dsv4;

constexpr int kOut = 4096, kIn = 8192, kHc = 4, kLinks = 43, kWeights = 4, kMaxRows = 4;

// A host-backed FP8 linear [kOut, kIn]: random e4m3 codes (no NaN), block scales 2^-9.
struct HostFp8 {
  std::vector<uint8_t> codes, scales;
  Fp8Linear w;
  HostFp8(int id, std::mt19937& gen) : codes(static_cast<size_t>(kOut) * kIn), scales((kOut / 128) * (kIn / 128), 118) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& c : codes) {
      c = static_cast<uint8_t>(byte(gen));
      if ((c & 0x7f) == 0x7f) c ^= 1;  // e4m3 NaN codes -> finite
    }
    const std::string name = "wo_b." + std::to_string(id);
    w.weight = test::byte_view(name + ".weight", DType::F8_E4M3, {kOut, kIn}, codes);
    w.scale = test::byte_view(name + ".scale", DType::F8_E8M0, {kOut / 128, kIn / 128}, scales);
  }
};

std::vector<float> normals(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

}  // namespace

int run_all(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  std::mt19937 gen(11);
  std::vector<std::unique_ptr<HostFp8>> weights;
  for (int i = 0; i < kWeights; ++i) weights.push_back(std::make_unique<HostFp8>(i, gen));
  for (const auto& w : weights) {
    ops->prepare(w->w.weight);
    ops->prepare(w->w.scale);
  }
  const size_t n_y = static_cast<size_t>(kMaxRows) * kOut, n_h = n_y * kHc;
  auto put = [&](const std::vector<float>& host) {
    FBuf d = ops->alloc(host.size());
    ops->upload(d.data(), host.data(), host.size());
    return d;
  };
  FBuf x = put(normals(static_cast<size_t>(kMaxRows) * kIn, gen)), res = put(normals(n_h, gen)),
       post = put(normals(kMaxRows * kHc, gen)), comb = put(normals(kMaxRows * kHc * kHc, gen));
  // Every link's own outputs, per variant: [kLinks][n_y] and [kLinks][n_h].
  FBuf y[2] = {ops->alloc(kLinks * n_y), ops->alloc(kLinks * n_y)};
  FBuf h[2] = {ops->alloc(kLinks * n_h), ops->alloc(kLinks * n_h)};
  const char* names[2] = {"pair", "fused"};
  for (int rows = 1; rows <= kMaxRows; ++rows) {
    std::vector<float> got[2][2];  // [variant][y, h]
    for (int v = 0; v < 2; ++v) {
      auto body = [&] {
        for (int l = 0; l < kLinks; ++l) {
          const Fp8Linear& w = weights[l % kWeights]->w;
          float* yl = y[v].data() + l * n_y;
          float* hl = h[v].data() + l * n_h;
          if (v == 0) {
            ops->linear_fp8(w, x.data(), rows, true, yl);
            ops->hc_post(yl, res.data(), post.data(), comb.data(), rows, kHc, kOut, hl);
          } else {
            ops->linear_fp8_hc_post(w, x.data(), rows, true, yl, res.data(), post.data(), comb.data(), kHc, hl);
          }
        }
      };
      const StepKey key{names[v], rows, {}};
      for (int i = 0; i < 3; ++i) ops->run_step(key, body);  // plain, captured, replayed
      ops->synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) ops->run_step(key, body);
      ops->synchronize();
      const auto t1 = std::chrono::steady_clock::now();
      const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / reps / kLinks;
      for (int part = 0; part < 2; ++part) {
        const size_t n = part == 0 ? n_y : n_h;
        std::vector<float> all(kLinks * n);
        ops->download(all.data(), (part == 0 ? y[v] : h[v]).data(), all.size());
        for (int l = 0; l < kLinks; ++l)  // the call's rows of each link
          got[v][part].insert(got[v][part].end(), all.begin() + l * n,
                              all.begin() + l * n + (part == 0 ? rows * kOut : rows * kHc * kOut));
      }
      std::printf("wo_b [%d, %d] hc %d rows %d %-5s %8.2f us/link", kOut, kIn, kHc, rows, names[v], us);
      if (v == 1) {
        auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
          return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
        };
        const bool same = bits_equal(got[0][0], got[1][0]) && bits_equal(got[0][1], got[1][1]);
        std::printf("  %s", same ? "=pair" : "DIFFERS");
      }
      std::printf("\n");
    }
  }
  const StepGraphCounts c = ops->step_graph_counts();
  std::printf("step graphs: %lld plain, %lld captured, %lld replayed\n", static_cast<long long>(c.plain),
              static_cast<long long>(c.captures), static_cast<long long>(c.replays));
  return 0;
}

int main(int argc, char** argv) { return dsv4::dev::guarded_main("dsv4-dev-wo-hc-post", argc, argv, run_all); }

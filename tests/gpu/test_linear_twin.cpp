// CUDA vs CPU: L-bf16 / L-island linears and grouped wo_a (MODEL.md §3.3, §4.21), plus
// the m-row twin law: a row of a T-row call equals the same row alone, bit for bit
// (SPECDECODE.md §6.3).
#include "kernels/cuda/gemv_kernel.h"
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

// GPU: each row of a `rows`-row call against the single-row call of that row.
template <class F>
void check_row_independent(Backends& b, const std::string& what, const PairF& x, int64_t in,
                           int64_t out, int rows, F op) {
  PairF all = zeros(b, static_cast<size_t>(rows) * out), one = zeros(b, static_cast<size_t>(rows) * out);
  op(x[kGpu], rows, all[kGpu]);
  for (int r = 0; r < rows; ++r) op(x[kGpu] + r * in, 1, one[kGpu] + r * out);
  check_bitwise(what + " rows vs single rows", get(b, all, kGpu), get(b, one, kGpu));
}

// grouped_wo_a CUDA vs CPU on [groups * o_rank, cols] FP8 weights, and its rows vs single rows.
void check_grouped_wo_a(Backends& b, Store& store, Rng& rng, int groups, int o_rank, int cols, int rows,
                        const std::string& what) {
  const Fp8Linear w = store.fp8("wo_a", groups * o_rank, cols, rng);
  PairF o = put(b, rng.normals(rows * groups * cols));
  PairF og = zeros(b, rows * groups * o_rank);
  for (int s : {kCpu, kGpu}) b.at(s).grouped_wo_a(w, o[s], rows, groups, true, og[s]);
  // L-bf16 on both (f32, different order, <= 4096 terms): ~1e-6; bound 1e-5.
  check_close(what, get(b, og, kCpu), get(b, og, kGpu), 1e-5, 1e-5);
  check_row_independent(b, what, o, groups * cols, groups * o_rank, rows,
                        [&](const float* xp, int r, float* yp) { b.gpu->grouped_wo_a(w, xp, r, groups, true, yp); });
}

}  // namespace

TEST_CASE("linear_fp8 twin (L-bf16), partial 128-blocks, and row independence") {
  Backends b;
  Rng rng(31);
  Store store;
  const int64_t out = 200, in = 136;  // partial edge blocks (CHECKPOINT.md §3.4)
  const Fp8Linear w = store.fp8("wq_a", out, in, rng);
  const int rows = 7;
  PairF x = put(b, rng.normals(rows * in));
  for (bool act : {true, false}) {
    PairF y = zeros(b, rows * out);
    for (int s : {kCpu, kGpu}) b.at(s).linear_fp8(w, x[s], rows, act, y[s]);
    // Both f32 accumulation, different summation order (136 terms): ~1e-7; bound 1e-5.
    check_close(act ? "linear_fp8 bf16 act" : "linear_fp8 f32 act", get(b, y, kCpu), get(b, y, kGpu),
                1e-5, 1e-5);
  }
  check_row_independent(b, "linear_fp8", x, in, out, rows,
                        [&](const float* xp, int r, float* yp) { b.gpu->linear_fp8(w, xp, r, true, yp); });
}

TEST_CASE("linear_bf16 and linear_island twins") {
  Backends b;
  Rng rng(32);
  Store store;
  const int64_t out = 96, in = 256;
  std::vector<float> wv = rng.normals(out * in, 0.1f);
  const TensorView wb = store.bf16("weights_proj", {out, in}, wv);
  const TensorView wf = store.f32("wkv", {out, in}, rng.normals(out * in, 0.1f));
  const int rows = 5;
  PairF x = put(b, rng.normals(rows * in));
  PairF y = zeros(b, rows * out);
  for (int s : {kCpu, kGpu}) b.at(s).linear_bf16(wb, x[s], rows, true, y[s]);
  // f32 accumulation on both, different order: bound 1e-5.
  check_close("linear_bf16", get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
  for (const TensorView* w : {&wb, &wf}) {
    for (int s : {kCpu, kGpu}) b.at(s).linear_island(*w, x[s], rows, y[s]);
    // f32 serving arm vs f64 oracle over 256 terms: ~1e-7; bound 1e-5.
    check_close("linear_island " + w->name, get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
  }
  check_row_independent(b, "linear_island", x, in, out, rows,
                        [&](const float* xp, int r, float* yp) { b.gpu->linear_island(wf, xp, r, yp); });
}

TEST_CASE("grouped_wo_a twin: group g uses rows [g*Or, (g+1)*Or) on its own columns") {
  Backends b;
  Rng rng(33);
  Store store;
  check_grouped_wo_a(b, store, rng, 4, 128, 256, 3, "grouped_wo_a");
}

TEST_CASE("linear_fp8 and grouped_wo_a twins at Flash shapes: split warps, 1..9 rows") {
  // [512, 4096] (wkv) and [128, 16384] run with 4 and 8 warps per output set
  // (linear.cuh gemv_splits); 9 rows take two passes of the 8-row kernel.
  Backends b;
  Rng rng(34);
  Store store;
  const int rows = 9;
  for (const auto& [out, in] : {std::pair<int64_t, int64_t>{512, 4096}, {128, 16384}}) {
    const Fp8Linear w = store.fp8("wkv", out, in, rng);
    PairF x = put(b, rng.normals(rows * in));
    PairF y = zeros(b, rows * out);
    for (int s : {kCpu, kGpu}) b.at(s).linear_fp8(w, x[s], rows, true, y[s]);
    // f32 on both, different summation orders over 4096-16384 terms: ~1e-6; bound 1e-5.
    check_close(cat("linear_fp8 [", out, ", ", in, "]"), get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
    check_row_independent(b, cat("linear_fp8 [", out, ", ", in, "]"), x, in, out, rows,
                          [&](const float* xp, int r, float* yp) { b.gpu->linear_fp8(w, xp, r, true, yp); });
  }
  // Flash wo_a: G = 8, Or = 1024, nh*D/G = 4096.
  check_grouped_wo_a(b, store, rng, 8, 1024, 4096, 3, "grouped_wo_a Flash");
}

TEST_CASE("linear_fp8 twin on the tensor-core GEMV: 8 to 32 MiB weights at 2, 3, 5, 8 and 9 rows") {
  // Weights of >= 8 MiB take the tensor-core arithmetic (gemv_tc.cuh, streamed by the
  // cp.async ring of gemv_tc_ring.cuh): 16-row tiles, up to 8 rows per tile; 8 warps per
  // tile for the shared expert
  // [2048, 4096] and [1000, 8448] (a partial tile, a partial 128-row scale block), 1 and 8
  // warps per tile for wq_b [32768, 1024] and wo_b [4096, 8192]. bf16 activations
  // (one bf16 plane) and f32 ones (three exact planes). Every row must equal its
  // single-row call bit for bit.
  Backends b;
  Rng rng(35);
  Store store;
  for (const auto& [out, in] :
       {std::pair<int64_t, int64_t>{2048, 4096}, {32768, 1024}, {4096, 8192}, {1000, 8448}}) {
    const Fp8Linear w = store.fp8("tc", out, in, rng);
    for (int rows : {2, 3, 5, 8, 9}) {
      PairF x = put(b, rng.normals(rows * in));
      for (bool act : {true, false}) {
        PairF y = zeros(b, rows * out);
        for (int s : {kCpu, kGpu}) b.at(s).linear_fp8(w, x[s], rows, act, y[s]);
        // Every product exact on both (bf16 x bf16 in the mma's f32, as the CPU's f32 of
        // the dequantized weight), f32 sums in different orders over 1024-8448 terms:
        // ~1e-6; bound 1e-5.
        const std::string what = cat("linear_fp8 [", out, ", ", in, "] rows ", rows, act ? " bf16" : " f32", " act");
        check_close(what, get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
        check_row_independent(b, what, x, in, out, rows,
                              [&](const float* xp, int r, float* yp) { b.gpu->linear_fp8(w, xp, r, act, yp); });
      }
    }
  }
}

TEST_CASE("tensor-core GEMV: the cp.async ring equals gemv_tc bit for bit, 1..9 rows, and the CPU") {
  // The ring (gemv_tc_ring.cuh) feeds gemv_tc's arithmetic (same splits, K order
  // and combine) from shared memory, one launch per row count's stage choice (x from
  // global memory at 1 row, staged with the weights at 2-8, S 4 / 3 / 2), so every row
  // count must give gemv_tc's bits: the shared expert's w1 [2048, 4096] (gemv_tc at U2 B1),
  // wq_b [32768, 1024] (1 warp per tile), wo_b [4096, 8192] (8), [1000, 8448] (a partial
  // tile and a partial 128-row scale block, 66 k-blocks over 8 splits), and the Flash
  // grouped wo_a (8 x [1024, 4096], 4 warps per tile); bf16 and f32 activations.
  Backends b;
  Rng rng(36);
  Store store;
  const int rows = 9;  // two row blocks of 8
  using cuda::TcGemvKernel;
  // For n = 1..9 rows (the first n of x): run(kernel, n, y) on the ring and on gemv_tc,
  // bitwise equal, and equal to the first n rows of the 9-row ring call y9.
  auto check = [&](const std::string& what, int64_t width, const PairF& y9, auto run) {
    for (int n = 1; n <= rows; ++n) {
      PairF ring = zeros(b, static_cast<size_t>(n) * width), tc = zeros(b, static_cast<size_t>(n) * width);
      run(TcGemvKernel::ring, n, ring[kGpu]);
      run(TcGemvKernel::tc, n, tc[kGpu]);
      const std::vector<float> got = get(b, ring, kGpu);
      check_bitwise(cat(what, " ring vs gemv_tc, ", n, " rows"), get(b, tc, kGpu), got);
      // A row of an n-row call equals the same row of the 9-row call (R-I3).
      const std::vector<float> all = get(b, y9, kGpu);
      check_bitwise(cat(what, " ", n, " rows vs 9 rows"), std::vector<float>(all.begin(), all.begin() + got.size()),
                    got);
    }
  };
  for (const auto& [out, in] :
       {std::pair<int64_t, int64_t>{2048, 4096}, {32768, 1024}, {4096, 8192}, {1000, 8448}}) {
    const Fp8Linear w = store.fp8("tc_ring", out, in, rng);
    PairF x = put(b, rng.normals(rows * in));
    for (bool act : {true, false}) {
      const std::string what = cat("linear_fp8 [", out, ", ", in, "]", act ? " bf16" : " f32", " act");
      PairF y = zeros(b, rows * out);
      b.cpu->linear_fp8(w, x[kCpu], rows, act, y[kCpu]);
      cuda::linear_fp8_with(*b.gpu, TcGemvKernel::automatic, w, x[kGpu], rows, act, y[kGpu]);
      // Exact products on both, f32 sums in different orders over 1024-8448 terms: ~1e-6;
      // bound 1e-5 (as the tensor-core case above).
      check_close(what, get(b, y, kCpu), get(b, y, kGpu), 1e-5, 1e-5);
      check(what, out, y, [&](TcGemvKernel k, int n, float* yp) {
        cuda::linear_fp8_with(*b.gpu, k, w, x[kGpu], n, act, yp);
      });
    }
  }
  const int groups = 8, o_rank = 1024, cols = 4096;  // Flash wo_a
  const Fp8Linear wo_a = store.fp8("wo_a", groups * o_rank, cols, rng);
  PairF o = put(b, rng.normals(rows * groups * cols));
  PairF og = zeros(b, rows * groups * o_rank);
  b.cpu->grouped_wo_a(wo_a, o[kCpu], rows, groups, true, og[kCpu]);
  cuda::grouped_wo_a_with(*b.gpu, TcGemvKernel::automatic, wo_a, o[kGpu], rows, groups, true, og[kGpu]);
  // L-bf16 on both (f32, different order, 4096 terms): ~1e-6; bound 1e-5.
  check_close("grouped_wo_a ring", get(b, og, kCpu), get(b, og, kGpu), 1e-5, 1e-5);
  check("grouped_wo_a Flash", groups * o_rank, og, [&](TcGemvKernel k, int n, float* yp) {
    cuda::grouped_wo_a_with(*b.gpu, k, wo_a, o[kGpu], n, groups, true, yp);
  });
}

}  // namespace dsv4::twin

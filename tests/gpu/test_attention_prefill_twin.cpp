// CUDA vs CPU: the prefill sink attention kernel (kernels/cuda/attention_prefill.cu;
// MODEL.md §4.20 with D12) at Flash shapes and odd small ones, -1 pads and whole tiles of
// them, rows without a valid entry; every row alone bit-identical to its row of the
// multi-row call, and trailing -1 pads inert bit for bit (law 3).
//
// Tolerance: the kernel's products are bf16x3 (hi*hi + hi*lo + lo*hi of two-plane
// splits, each within ~3 * 2^-18 relative of exact). Those products emulated on the host
// (the kernel's fragment maps and tile order, exact products, f64 sums) against the f64
// oracle at 64 heads x 512 dims x 640 keys give rel L2 4.2e-6 and max_norm 8.0e-6 with
// logits N(0, 1), 6.2e-6 / 1.4e-5 with logits N(0, 3) (the logit error grows with the
// logits). Bounds: 5e-5 (logits sd <= 1) and 1e-4 (sd 3), a 5-7x margin; one dropped key
// of ~235 effective ones moves o by ~4e-3 and a one-plane operand by ~1e-3, both caught.
// Law 2's bound in the chunked-prefill tests is 1e-3 (D15).
#include <cuda_runtime.h>

#include "kernels/cuda/attention_prefill.cuh"
#include "tests/gpu/attention_case.h"

namespace dsv4::twin {

namespace {

// The prefill kernel on `rows` rows of CUDA buffers (CudaOps' stream drained first, ours
// after): q and o at row offset `t0`, index rows `idx` of `width` entries.
void run_prefill(Backends& b, const AttentionInputs& in, const AttentionCase& c, const float* sink, int t0,
                 int rows, const int32_t* idx, int width, float* o) {
  b.gpu->synchronize();
  cuda::sink_attention_prefill(in.q[kGpu] + t0 * in.row_q, rows, c.heads, c.dim, in.kv[kGpu], idx, width, sink,
                               false, in.scale, o + t0 * in.row_q, nullptr);
  REQUIRE(cudaStreamSynchronize(nullptr) == cudaSuccess);
}

// One CPU call and one prefill-kernel call over all rows within `bound`; then every row
// alone, and the rows padded with 37 more -1 entries, bit-identical to the first call.
void check_case(const std::string& what, const AttentionCase& c, uint64_t seed, double bound) {
  Backends b;
  AttentionInputs in(b, c, seed);
  PairF sink_dev = put(b, c.sink);
  const float* sink = sink_dev[kGpu];
  PairF o = zeros(b, in.q.n);
  b.cpu->sink_attention(in.q[kCpu], c.rows, c.heads, c.dim, in.kv[kCpu], in.idx[kCpu], c.width, in.sink, in.scale,
                        o[kCpu]);
  run_prefill(b, in, c, sink, 0, c.rows, in.idx[kGpu], c.width, o[kGpu]);
  const std::vector<float> all = get(b, o, kGpu);
  check_close(what, get(b, o, kCpu), all, bound, bound);

  PairF one = zeros(b, in.q.n);
  for (int t = 0; t < c.rows; ++t) run_prefill(b, in, c, sink, t, 1, in.idx[kGpu] + t * c.width, c.width, one[kGpu]);
  check_bitwise(what + ": rows vs single rows", all, get(b, one, kGpu));

  const int wide = c.width + 37;
  PairI ix_wide = put_i32(b, padded_index(c, wide));
  PairF o_wide = zeros(b, in.q.n);
  run_prefill(b, in, c, sink, 0, c.rows, ix_wide[kGpu], wide, o_wide[kGpu]);
  check_bitwise(what + ": trailing -1 pads", all, get(b, o_wide, kGpu));
}

std::vector<float> sinks(int heads, uint64_t seed) {
  Rng pick(seed);
  std::vector<float> s;
  for (int h = 0; h < heads; ++h) s.push_back(pick.normal(2.0f));
  return s;
}

}  // namespace

TEST_CASE("sink_attention prefill kernel at Flash shapes: 64 heads x 512, width 640") {
  // A ratio-4 layer's rows: window 128 then top-k 512; a young window (row t sees 100 + 9t
  // slots), a whole 32-entry run of pads (two 16-entry tiles skipped), ragged -1 tails;
  // and a prefill-like row 0: window of one entry, no compressed pick.
  for (float q_sd : {1.0f, 3.0f}) {
    AttentionCase c{8, 64, 512, 128 + 4096, 640, {}, sinks(64, 90), q_sd};
    c.idx.assign(static_cast<size_t>(c.rows) * c.width, -1);
    for (int t = 0; t < c.rows; ++t) {
      int32_t* row = c.idx.data() + static_cast<size_t>(t) * c.width;
      if (t == 0) {
        row[0] = 0;
        continue;
      }
      for (int k = 0; k < std::min(128, 100 + 9 * t); ++k) row[k] = k;
      for (int k = 128; k < 640 - 13 * t; ++k)
        if (k < 320 || k >= 352) row[k] = 128 + (k * 37 + t * 11) % 4096;
    }
    check_case("prefill attention flash q_sd " + std::to_string(q_sd), c, 91, q_sd > 1.0f ? 1e-4 : 5e-5);
  }
}

TEST_CASE("sink_attention prefill kernel at odd shapes: partial head groups, short rows, no entry") {
  // 8 heads (one group of 32, 24 padded) x 128 dims (two warps), width 20 (a partial
  // second tile); row 1 has interior pads, row 2 none valid (o = 0 / e^0), row 3 one entry.
  {
    AttentionCase c{5, 8, 128, 50, 20, {}, sinks(8, 92), 1.0f};
    c.idx.assign(static_cast<size_t>(c.rows) * c.width, -1);
    for (int t = 0; t < c.rows; ++t)
      for (int k = 0; k < c.width; ++k) {
        const bool valid = t == 3 ? k == 17 : t != 2 && k < 6 + 3 * t && !(t == 1 && k % 3 == 1);
        if (valid) c.idx[t * c.width + k] = (k * 7 + t * 3) % c.n_kv;
      }
    check_case("prefill attention 8x128 width 20", c, 93, 5e-5);
  }
  // 40 heads (a full group and one of 8) x 64 dims (one warp), width 33, 3 rows.
  {
    AttentionCase c{3, 40, 64, 300, 33, {}, sinks(40, 94), 1.0f};
    c.idx.assign(static_cast<size_t>(c.rows) * c.width, -1);
    for (int t = 0; t < c.rows; ++t)
      for (int k = 0; k < c.width - 5 * t; ++k) c.idx[t * c.width + k] = (k * 53 + t * 17) % c.n_kv;
    check_case("prefill attention 40x64 width 33", c, 95, 5e-5);
  }
}

TEST_CASE("sink_attention_gemm (a prefill's rows through CudaOps): the prefill kernel's bits, the split kernel's "
          "where that does not take the head dim") {
  // 24 rows of a ratio-4 layer at Flash shapes; the sink stored BF16 as in a checkpoint
  // (CudaOps::dense hands the kernel the bf16 copy).
  {
    AttentionCase c{24, 64, 512, 128 + 4096, 640, {}, sinks(64, 96), 1.0f};
    c.idx.assign(static_cast<size_t>(c.rows) * c.width, -1);
    for (int t = 0; t < c.rows; ++t)
      for (int k = 0; k < 640 - 11 * t; ++k) c.idx[t * c.width + k] = (k * 41 + t * 5) % c.n_kv;
    Backends b;
    AttentionInputs in(b, c, 97);
    std::vector<float> sink_bf(c.sink);  // becomes the stored bf16 values
    const TensorView sink = in.store.bf16("attn_sink_bf16", {c.heads}, sink_bf);
    PairF o = zeros(b, in.q.n);
    for (int s : {kCpu, kGpu})
      b.at(s).sink_attention_gemm(in.q[s], c.rows, c.heads, c.dim, in.kv[s], in.idx[s], c.width, sink, in.scale,
                                  o[s]);
    check_close("sink_attention_gemm flash 24 rows", get(b, o, kCpu), get(b, o, kGpu), 5e-5, 5e-5);
    PairF sink_dev = put(b, sink_bf);
    PairF direct = zeros(b, in.q.n);
    run_prefill(b, in, c, sink_dev[kGpu], 0, c.rows, in.idx[kGpu], c.width, direct[kGpu]);
    check_bitwise("sink_attention_gemm vs the prefill kernel", get(b, o, kGpu), get(b, direct, kGpu));
  }
  // Head dim 96: not the prefill kernel's; the op is sink_attention, bit for bit.
  {
    AttentionCase c{6, 8, 96, 40, 24, {}, sinks(8, 98), 1.0f};
    c.idx.assign(static_cast<size_t>(c.rows) * c.width, -1);
    for (int t = 0; t < c.rows; ++t)
      for (int k = 0; k < c.width - 3 * t; ++k) c.idx[t * c.width + k] = (k * 7 + t) % c.n_kv;
    Backends b;
    AttentionInputs in(b, c, 99);
    PairF o = zeros(b, in.q.n), split = zeros(b, in.q.n);
    b.gpu->sink_attention_gemm(in.q[kGpu], c.rows, c.heads, c.dim, in.kv[kGpu], in.idx[kGpu], c.width, in.sink,
                               in.scale, o[kGpu]);
    b.gpu->sink_attention(in.q[kGpu], c.rows, c.heads, c.dim, in.kv[kGpu], in.idx[kGpu], c.width, in.sink,
                          in.scale, split[kGpu]);
    check_bitwise("sink_attention_gemm at dim 96 vs sink_attention", get(b, o, kGpu), get(b, split, kGpu));
  }
}

TEST_CASE("sink_attention prefill kernel refuses head dims it does not take, by name") {
  for (int dim : {96, 576}) {
    CAPTURE(dim);
    CHECK_FALSE(cuda::prefill_attention_supports(dim));
    CHECK_THROWS_WITH_AS(cuda::sink_attention_prefill(nullptr, 1, 1, dim, nullptr, nullptr, 1, nullptr, false,
                                                      1.0f, nullptr, nullptr),
                         doctest::Contains(("head dim " + std::to_string(dim)).c_str()), Error);
  }
  CHECK(cuda::prefill_attention_supports(512));
  CHECK(cuda::prefill_attention_supports(64));
}

}  // namespace dsv4::twin

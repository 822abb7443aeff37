// CUDA vs CPU: compressor pooling + norm + rope + quantizer (MODEL.md §4.16 steps 3-6).
#include <utility>

#include "kernels/cuda/compress_kernel.h"
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

struct Case {
  const char* name;
  int ratio, d;
  bool rotate, with_prev;
  Numerics num;
  double rel_l2, max_norm;
};

// Row independence (SPECDECODE.md §6.3 R-I3) on CUDA: block b of a multi-block call equals
// block b compressed alone (its own rows, its predecessor's rows as prev) bit for bit.
void check_blocks_alone(Backends& b, const Case& k, const CompressorWeights& c, const PairF& kv,
                        const PairF& score, const PairF& prev_kv, const PairF& prev_score, int n_blocks,
                        int first_block, const RopeTable& rope, const std::vector<float>& together) {
  const int64_t lc = c.latent(), block_floats = int64_t{c.ratio} * lc;
  PairF one = zeros(b, static_cast<size_t>(c.d));
  for (int j = 0; j < n_blocks; ++j) {
    const float* pk = j > 0 ? kv[kGpu] + (j - 1) * block_floats : (k.with_prev ? prev_kv[kGpu] : nullptr);
    const float* ps = j > 0 ? score[kGpu] + (j - 1) * block_floats : (k.with_prev ? prev_score[kGpu] : nullptr);
    b.gpu->compress_blocks(c, kv[kGpu] + j * block_floats, score[kGpu] + j * block_floats, 1, c.overlap ? pk : nullptr,
                           c.overlap ? ps : nullptr, first_block + j, rope, 1e-6, k.num, one[kGpu]);
    const std::vector<float> alone = get(b, one, kGpu);
    check_bitwise(std::string(k.name) + ": block " + std::to_string(j) + " alone", alone,
                  {together.begin() + int64_t{j} * c.d, together.begin() + int64_t{j + 1} * c.d});
  }
}

// A case's compressor and raw rows on both backends: n_blocks blocks from first_block, a
// predecessor block (prev_*), seeded by `seed`.
struct Inputs {
  Store store;
  CompressorWeights c;
  RopeTable rope;
  PairF kv, score, prev_kv, prev_score;
  Inputs(Backends& b, const Case& k, int n_blocks, int first_block, uint32_t seed) {
    Rng rng(seed);
    c.ratio = k.ratio;
    c.overlap = k.ratio == 4;
    c.rotate = k.rotate;
    c.d = k.d;
    const int lc = c.latent();
    c.ape = store.f32("compressor.ape", {c.ratio, lc}, rng.normals(static_cast<size_t>(c.ratio) * lc, 0.5f));
    c.norm = store.f32("compressor.norm", {c.d}, rng.normals(c.d, 0.5f));
    rope = make_rope_table(160000.0, 64, (first_block + n_blocks) * c.ratio, nullptr);
    const size_t rows = static_cast<size_t>(n_blocks) * c.ratio;
    kv = put(b, rng.normals(rows * lc));
    score = put(b, rng.normals(rows * lc, 2.0f));
    prev_kv = put(b, rng.normals(static_cast<size_t>(c.ratio) * lc));
    prev_score = put(b, rng.normals(static_cast<size_t>(c.ratio) * lc, 2.0f));
  }
};

void run_case(const Case& k) {
  Backends b;
  const int n_blocks = 3, first_block = 2;
  Inputs in(b, k, n_blocks, first_block, 41 + k.ratio + (k.rotate ? 100 : 0) + (k.with_prev ? 7 : 0));
  const CompressorWeights& c = in.c;
  PairF out = zeros(b, static_cast<size_t>(n_blocks) * c.d);
  for (int s : {kCpu, kGpu})
    b.at(s).compress_blocks(c, in.kv[s], in.score[s], n_blocks, k.with_prev ? in.prev_kv[s] : nullptr,
                            k.with_prev ? in.prev_score[s] : nullptr, first_block, in.rope, 1e-6, k.num, out[s]);
  const std::vector<float> got = get(b, out, kGpu);
  check_close(k.name, get(b, out, kCpu), got, k.rel_l2, k.max_norm);
  check_blocks_alone(b, k, c, in.kv, in.score, in.prev_kv, in.prev_score, n_blocks, first_block, in.rope, got);
}

// compress_blocks by both kernels (compress_kernel.h) on the same inputs: bit for bit.
void check_kernels_agree(const Case& k, int n_blocks) {
  Backends b;
  const int first_block = 3;
  Inputs in(b, k, n_blocks, first_block, 61 + k.ratio + k.d + n_blocks);
  const size_t n_out = static_cast<size_t>(n_blocks) * in.c.d;
  PairF one = zeros(b, n_out), split = zeros(b, n_out);
  for (auto [kernel, out] : {std::pair{cuda::CompressKernel::one_pass, one[kGpu]},
                             std::pair{cuda::CompressKernel::pool_then_finish, split[kGpu]}})
    cuda::compress_blocks_with(*b.gpu, kernel, in.c, in.kv[kGpu], in.score[kGpu], n_blocks,
                               k.with_prev ? in.prev_kv[kGpu] : nullptr, k.with_prev ? in.prev_score[kGpu] : nullptr,
                               first_block, in.rope, 1e-6, k.num, out);
  check_bitwise(std::string(k.name) + ": pool_then_finish vs one_pass, " + std::to_string(n_blocks) + " blocks",
                get(b, one, kGpu), get(b, split, kGpu));
}

}  // namespace

// Issue 13: the pooling spread over 32-dim chunks, then the finishing, gives the one-pass
// kernel's bits at Flash shapes (a ratio-128 prefill of 1,024 / 2,048 tokens: 8 / 16 blocks),
// with a predecessor and 37 blocks at ratio 4, the indexer's Hadamard + FP4 finishing, and
// d = 100 (a last chunk of 4 dims; the finishing without a quantizer).
TEST_CASE("compress_blocks kernels: pool_then_finish bit for bit one_pass") {
  Numerics plain, e4m3, no_fp4;
  e4m3.kv_quant = KvQuant::e4m3;
  no_fp4.indexer_quant = IndexerQuant::none;
  for (int n : {1, 8, 16}) {
    check_kernels_agree({"Flash r128 attention d512 clamp", 128, 512, false, false, plain, 0, 0}, n);
    check_kernels_agree({"Flash r128 attention d512 e4m3", 128, 512, false, false, e4m3, 0, 0}, n);
  }
  check_kernels_agree({"Flash overlap r4 attention d512, prev", 4, 512, false, true, plain, 0, 0}, 37);
  check_kernels_agree({"overlap r4 indexer hadamard+fp4, prev", 4, 128, true, true, plain, 0, 0}, 37);
  check_kernels_agree({"r16 indexer d100, indexer_quant none", 16, 100, true, false, no_fp4, 0, 0}, 5);
}

TEST_CASE("compress_blocks twin: overlap / non-overlap, attention / indexer finishing") {
  Numerics plain;  // kv_quant clamp (identity), indexer_quant fp4
  Numerics no_fp4;
  no_fp4.indexer_quant = IndexerQuant::none;
  Numerics e4m3;
  e4m3.kv_quant = KvQuant::e4m3;
  // No rounding step after the pool: f32 chain vs f64 plus expf ulps, ~1e-6; bound 1e-5.
  run_case({"overlap r4 attention clamp, no prev", 4, 128, false, false, plain, 1e-5, 1e-5});
  run_case({"overlap r4 attention clamp, prev", 4, 128, false, true, plain, 1e-5, 1e-5});
  run_case({"non-overlap r16 attention clamp", 16, 128, false, false, plain, 1e-5, 1e-5});
  run_case({"overlap r4 indexer, indexer_quant none (no rotation, no FP4)", 4, 128, true, true, no_fp4, 1e-5, 1e-5});
  // Flash shapes (attention d = D = 512 at ratios 4 and 128; the indexer's d = Id = 128 is
  // the cases above): the same chain, 128 entries at ratio 128 (~1e-6 still).
  run_case({"Flash overlap r4 attention d512 clamp, prev", 4, 512, false, true, plain, 1e-5, 1e-5});
  run_case({"Flash r128 attention d512 clamp", 128, 512, false, false, plain, 1e-5, 1e-5});
  // A ~1e-7 input difference flips an e4m3 / e2m1 rounding only for an element sitting on
  // a rounding boundary (rare); one flip moves it by one step: <= 1/8 of |v| (e4m3) or
  // <= 2 scales <= 0.5 max|out| (e2m1), ~0.07 of ||out|| for 384 elements. A wrong kernel
  // gives rel_l2 ~ 1.
  run_case({"overlap r4 attention e4m3", 4, 128, false, true, e4m3, 5e-2, 0.25});
  run_case({"overlap r4 indexer hadamard+fp4", 4, 128, true, true, plain, 1e-1, 0.6});
  run_case({"Flash r128 attention d512 e4m3", 128, 512, false, false, e4m3, 5e-2, 0.25});
}

}  // namespace dsv4::twin

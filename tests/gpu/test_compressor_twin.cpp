// CUDA vs CPU: compressor pooling + norm + rope + quantizer (MODEL.md §4.16 steps 3-6).
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

struct Case {
  const char* name;
  int ratio;
  bool rotate, with_prev;
  Numerics num;
  double rel_l2, max_norm;
};

void run_case(const Case& k) {
  Backends b;
  Rng rng(41 + k.ratio + (k.rotate ? 100 : 0) + (k.with_prev ? 7 : 0));
  Store store;
  CompressorWeights c;
  c.ratio = k.ratio;
  c.overlap = k.ratio == 4;
  c.rotate = k.rotate;
  c.d = 128;
  const int lc = c.latent(), n_blocks = 3, first_block = 2;
  c.ape = store.f32("compressor.ape", {c.ratio, lc}, rng.normals(static_cast<size_t>(c.ratio) * lc, 0.5f));
  c.norm = store.f32("compressor.norm", {c.d}, rng.normals(c.d, 0.5f));
  const RopeTable rope = make_rope_table(160000.0, 64, 256, nullptr);
  const size_t rows = static_cast<size_t>(n_blocks) * c.ratio;
  PairF kv = put(b, rng.normals(rows * lc)), score = put(b, rng.normals(rows * lc, 2.0f));
  PairF prev_kv = put(b, rng.normals(static_cast<size_t>(c.ratio) * lc));
  PairF prev_score = put(b, rng.normals(static_cast<size_t>(c.ratio) * lc, 2.0f));
  PairF out = zeros(b, static_cast<size_t>(n_blocks) * c.d);
  for (int s : {kCpu, kGpu})
    b.at(s).compress_blocks(c, kv[s], score[s], n_blocks, k.with_prev ? prev_kv[s] : nullptr,
                            k.with_prev ? prev_score[s] : nullptr, first_block, rope, 1e-6, k.num, out[s]);
  check_close(k.name, get(b, out, kCpu), get(b, out, kGpu), k.rel_l2, k.max_norm);
}

}  // namespace

TEST_CASE("compress_blocks twin: overlap / non-overlap, attention / indexer finishing") {
  Numerics plain;  // kv_quant clamp (identity), indexer_quant fp4
  Numerics no_fp4;
  no_fp4.indexer_quant = IndexerQuant::none;
  Numerics e4m3;
  e4m3.kv_quant = KvQuant::e4m3;
  // No rounding step after the pool: f32 chain vs f64 plus expf ulps, ~1e-6; bound 1e-5.
  run_case({"overlap r4 attention clamp, no prev", 4, false, false, plain, 1e-5, 1e-5});
  run_case({"overlap r4 attention clamp, prev", 4, false, true, plain, 1e-5, 1e-5});
  run_case({"non-overlap r16 attention clamp", 16, false, false, plain, 1e-5, 1e-5});
  run_case({"overlap r4 indexer, indexer_quant none (no rotation, no FP4)", 4, true, true, no_fp4, 1e-5, 1e-5});
  // A ~1e-7 input difference flips an e4m3 / e2m1 rounding only for an element sitting on
  // a rounding boundary (rare); one flip moves it by one step: <= 1/8 of |v| (e4m3) or
  // <= 2 scales <= 0.5 max|out| (e2m1), ~0.07 of ||out|| for 384 elements. A wrong kernel
  // gives rel_l2 ~ 1.
  run_case({"overlap r4 attention e4m3", 4, false, true, e4m3, 5e-2, 0.25});
  run_case({"overlap r4 indexer hadamard+fp4", 4, true, true, plain, 1e-1, 0.6});
}

}  // namespace dsv4::twin

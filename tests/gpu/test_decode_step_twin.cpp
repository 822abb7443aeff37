// CUDA vs CPU: the device-step ops of a position-independent plain decode step (issue 12,
// kernels/ops.h "device step"): the *_dev ops against their host-array twins on the same
// backend (bitwise: the same kernels, only where the position / ids / n_visible come
// from differs) and against the CPU; decode_index and compress_at at many positions, at
// Flash shapes and the tiny model's; the fused step ops (finish_kv_at, head_rms_rope_dev,
// rope_hadamard_fp4_dev) bitwise against the op chains they replace; and the tiny model's
// decode step issues the same calls at every position on CUDA too.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/gpu/twin_harness.h"
#include "tests/unit/stage/decode_calls.h"

namespace dsv4::twin {

namespace {

// The step position p on both backends.
PairI position(Backends& b, int64_t p) { return put_i32(b, {static_cast<int32_t>(p)}); }

bool all_nan(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isnan(x); });
}

}  // namespace

TEST_CASE("rope_dev twin: the host-array rope's bits; a position outside the table gives NaN") {
  Backends b;
  Rng rng(91);
  const RopeTable table = make_rope_table(10000.0, 64, 300, nullptr);
  const int rows = 5, heads = 3, dim = 128;
  std::vector<int32_t> pos(rows);
  for (auto& p : pos) p = rng.uniform_int(0, 299);
  PairI dpos = put_i32(b, pos);
  for (bool inverse : {false, true}) {
    const std::vector<float> v0 = rng.normals(static_cast<size_t>(rows) * heads * dim);
    PairF host = put(b, v0), dev = put(b, v0);
    b.gpu->rope(host[kGpu], rows, heads, dim, table, pos.data(), inverse);
    for (int s : {kCpu, kGpu}) b.at(s).rope_dev(dev[s], rows, heads, dim, table, dpos[s], inverse);
    check_close("rope_dev vs rope (cuda)", get(b, host, kGpu), get(b, dev, kGpu), 0, 0);
    check_close("rope_dev twin", get(b, dev, kCpu), get(b, dev, kGpu), 0, 0);  // as the rope twin
  }
  PairI bad = put_i32(b, {300});
  PairF v = put(b, rng.normals(dim));
  b.gpu->rope_dev(v[kGpu], 1, 1, dim, table, bad[kGpu], false);
  const std::vector<float> got = get(b, v, kGpu);
  CHECK(all_nan({got.end() - 64, got.end()}));  // the rope dims
  CHECK_THROWS_AS(b.cpu->rope_dev(v[kCpu], 1, 1, dim, table, bad[kCpu], false), Error);
}

// The decode step's q (64 heads x 512) and indexer q (64 heads x 128) at Flash shapes, two
// rows at different positions: on CUDA the bits of the two ops each fuses run one after the
// other; against the CPU with those ops' twin bounds (head_rms ~1e-7 relative, bound 1e-6;
// rope, Hadamard and FP4 exact).
TEST_CASE("head_rms_rope_dev / rope_hadamard_fp4_dev twin: two ops as one, bit for bit") {
  Backends b;
  Rng rng(92);
  const RopeTable table = make_rope_table(10000.0, 64, 70000, nullptr);
  const int rows = 2, heads = 64;
  PairI pos = put_i32(b, {4095, 65535});
  for (int dim : {512, 128}) {
    const bool rms = dim == 512;
    INFO((rms ? "head_rms_rope_dev" : "rope_hadamard_fp4_dev"));
    const std::vector<float> v0 = rng.normals(static_cast<size_t>(rows) * heads * dim, 2.0f);
    PairF fused = put(b, v0), chain = put(b, v0);
    Ops& gpu = *b.gpu;
    if (rms) {
      gpu.head_rms(chain[kGpu], rows * heads, dim, 1e-6);
      gpu.rope_dev(chain[kGpu], rows, heads, dim, table, pos[kGpu], false);
      for (int s : {kCpu, kGpu}) b.at(s).head_rms_rope_dev(fused[s], rows, heads, dim, 1e-6, table, pos[s]);
    } else {
      gpu.rope_dev(chain[kGpu], rows, heads, dim, table, pos[kGpu], false);
      gpu.hadamard_fp4(chain[kGpu], rows * heads, dim, true);
      for (int s : {kCpu, kGpu}) b.at(s).rope_hadamard_fp4_dev(fused[s], rows, heads, dim, table, pos[s]);
    }
    const std::vector<float> got = get(b, fused, kGpu);
    check_bitwise("fused vs the op chain (cuda)", get(b, chain, kGpu), got);
    check_close("fused twin", get(b, fused, kCpu), got, rms ? 1e-6 : 0, rms ? 1e-6 : 0);
  }
}

// A prefill's q (issue 13): head_rms_rope_dev at many vectors runs the register-resident
// kernel four vectors a block (rope.cu); still the chain's bits, and the CPU's within
// head_rms's bound. 80 rows x 64 heads, and 1,001 x 5 (a last block of one vector).
TEST_CASE("head_rms_rope_dev twin at a prefill's rows: the op chain's bits") {
  Backends b;
  Rng rng(94);
  const RopeTable table = make_rope_table(10000.0, 64, 70000, nullptr);
  const int dim = 512;
  for (auto [rows, heads] : {std::pair{80, 64}, std::pair{1001, 5}}) {
    INFO("rows " << rows << " heads " << heads);
    std::vector<int32_t> p(static_cast<size_t>(rows));
    for (auto& x : p) x = rng.uniform_int(0, 69999);
    PairI pos = put_i32(b, p);
    const std::vector<float> v0 = rng.normals(static_cast<size_t>(rows) * heads * dim, 2.0f);
    PairF fused = put(b, v0), chain = put(b, v0);
    b.gpu->head_rms(chain[kGpu], rows * heads, dim, 1e-6);
    b.gpu->rope_dev(chain[kGpu], rows, heads, dim, table, pos[kGpu], false);
    for (int s : {kCpu, kGpu}) b.at(s).head_rms_rope_dev(fused[s], rows, heads, dim, 1e-6, table, pos[s]);
    const std::vector<float> got = get(b, fused, kGpu);
    check_bitwise("fused vs the op chain (cuda)", get(b, chain, kGpu), got);
    check_close("fused twin", get(b, fused, kCpu), got, 1e-6, 1e-6);  // head_rms's bound
  }
}

TEST_CASE("route_dev twin: hash routing from device ids equals the host-id route") {
  constexpr int kHidden = 256, kExperts = 16, kK = 6, kRows = 5, kVocab = 32;
  Backends b;
  Rng rng(93);
  Store store;
  BlockWeights w;
  w.layer_id = 1;
  w.hash = true;
  std::vector<float> gate = rng.normals(kExperts * kHidden, 0.1f);
  w.gate_weight = store.bf16("ffn.gate.weight", {kExperts, kHidden}, gate);
  for (int v = 0; v < kVocab; ++v)
    for (int j = 0; j < kK; ++j) w.tid2eid.push_back((v * 5 + j * 3) % kExperts);
  PairF x = put(b, rng.normals(kRows * kHidden));
  const std::vector<int32_t> ids = {3, 0, 31, 7, 12};
  PairI dids = put_i32(b, ids);
  PairI sel_host = put_i32(b, std::vector<int32_t>(kRows * kK, -1)), sel = put_i32(b, std::vector<int32_t>(kRows * kK, -1));
  PairF wt_host = zeros(b, kRows * kK), wt = zeros(b, kRows * kK);
  b.gpu->route(w, x[kGpu], kRows, ids.data(), kHidden, kExperts, kK, 1.5f, sel_host[kGpu], wt_host[kGpu]);
  for (int s : {kCpu, kGpu})
    b.at(s).route_dev(w, x[s], kRows, dids[s], kHidden, kExperts, kK, 1.5f, sel[s], wt[s]);
  CHECK(get_i32(b, sel_host, kGpu) == get_i32(b, sel, kGpu));
  check_close("route_dev vs route (cuda) wt", get(b, wt_host, kGpu), get(b, wt, kGpu), 0, 0);
  CHECK(get_i32(b, sel, kCpu) == get_i32(b, sel, kGpu));  // the stored tid2eid rows
  // As the route twin: f32 sqrt(softplus) of f32 vs f64 logits, ~1e-6; bound 1e-5.
  check_close("route_dev twin wt", get(b, wt, kCpu), get(b, wt, kGpu), 1e-5, 1e-5);
  PairI bad = put_i32(b, {kVocab});
  b.gpu->route_dev(w, x[kGpu], 1, bad[kGpu], kHidden, kExperts, kK, 1.5f, sel[kGpu], wt[kGpu]);
  const std::vector<float> wt_bad = get(b, wt, kGpu);
  CHECK(all_nan({wt_bad.begin(), wt_bad.begin() + kK}));
}

TEST_CASE("indexer_topk_dev: device n_visible under a fixed n_cap selects what indexer_topk selects") {
  Backends b;
  Rng rng(94);
  const int heads = 64, dim = 128, n_cap = 2048, width = 512, rows = 3;  // Flash indexer shapes
  const std::vector<int32_t> n_visible = {0, 300, 1024};  // none, fewer than the top-k, more
  const float wscale = 1.0f / std::sqrt(static_cast<float>(dim * heads));
  PairF q = put(b, rng.normals(static_cast<size_t>(rows) * heads * dim));
  PairF w = put(b, rng.normals(static_cast<size_t>(rows) * heads));
  PairF keys = put(b, rng.normals(static_cast<size_t>(n_cap) * dim));
  PairI dn = put_i32(b, n_visible);
  const int stride = 128 + width, col0 = 128;
  PairI host = put_i32(b, std::vector<int32_t>(static_cast<size_t>(rows) * stride, -7));
  PairI dev = put_i32(b, std::vector<int32_t>(static_cast<size_t>(rows) * stride, -7));
  b.gpu->indexer_topk(q[kGpu], w[kGpu], rows, heads, dim, wscale, keys[kGpu], n_visible.data(), width, 128,
                      host[kGpu], stride, col0);
  for (int s : {kCpu, kGpu})
    b.at(s).indexer_topk_dev(q[s], w[s], rows, heads, dim, wscale, keys[s], dn[s], n_cap, width, 128, dev[s],
                             stride, col0);
  const std::vector<int32_t> got = get_i32(b, dev, kGpu);
  CHECK(get_i32(b, host, kGpu) == got);  // bitwise: the grid's extra blocks add nothing
  // The CPU picks as sets per row (the indexer twin's comparison; random scores: no near-ties
  // expected at 1e-5, a failure here names the row).
  const std::vector<int32_t> ref = get_i32(b, dev, kCpu);
  for (int t = 0; t < rows; ++t) {
    INFO("row " << t);
    const int32_t* r = ref.data() + static_cast<size_t>(t) * stride + col0;
    const int32_t* g = got.data() + static_cast<size_t>(t) * stride + col0;
    std::vector<int32_t> rs(r, r + width), gs(g, g + width);
    std::sort(rs.begin(), rs.end());
    std::sort(gs.begin(), gs.end());
    CHECK(rs == gs);
  }
}

// Plain decode rows (one row, the ring) and a verify round's rows (T = 2 and 4 from the
// position, in-round positions at transient rows trans_base + q - pos0, SPECDECODE §4.2).
TEST_CASE("decode_index twin: the CPU rows exactly, decode and verify rows, at Flash and tiny shapes") {
  Backends b;
  struct Shape { int ratio, window, topk, cap; };
  const Shape shapes[] = {{0, 128, 512, 0},   {4, 128, 512, 16384}, {128, 128, 512, 512},
                          {0, 16, 8, 0},      {4, 16, 8, 64},       {16, 16, 8, 16}};
  for (const Shape& sh : shapes) {
    const int tail = sh.ratio == 4 ? std::min(sh.topk, sh.cap) : sh.cap;
    const int64_t max_pos = sh.cap > 0 ? int64_t{sh.cap} * sh.ratio : 4096;
    const int trans_base = sh.window + sh.cap;  // the layer's transient rows (LayerCache)
    for (const int rows : {1, 2, 4})
      for (int64_t p = 0; p + rows <= max_pos; p += (p < 600 ? 1 : 97)) {
        std::vector<int32_t> positions(static_cast<size_t>(rows));
        for (int t = 0; t < rows; ++t) positions[t] = static_cast<int32_t>(p + t);
        PairI pos = put_i32(b, positions), nv = put_i32(b, std::vector<int32_t>(positions.size(), -5));
        PairI idx = put_i32(b, std::vector<int32_t>(static_cast<size_t>(rows) * (sh.window + tail), 7777));
        for (const int base : {-1, trans_base}) {
          if (base < 0 && rows > 1) continue;  // a verify round's rows only
          for (int s : {kCpu, kGpu})
            b.at(s).decode_index(pos[s], rows, sh.ratio, sh.window, tail, base, idx[s],
                                 sh.ratio == 4 ? nv[s] : nullptr);
          INFO("ratio " << sh.ratio << " window " << sh.window << " position " << p << " rows " << rows
                        << " trans_base " << base);
          REQUIRE(get_i32(b, idx, kCpu) == get_i32(b, idx, kGpu));
          REQUIRE(get_i32(b, nv, kCpu) == get_i32(b, nv, kGpu));
        }
      }
  }
}

// finish_kv_at at Flash shapes (D 512, rope 64, window 128): on CUDA the bits of the three ops
// it fuses run one after the other, then copied to slot p mod 128 (kv row and ring); against
// the CPU as those ops' twins. Only the slot of p changes in the ring.
TEST_CASE("finish_kv_at twin: rmsnorm, rope_dev, kv_act_quant and the ring slot as one op") {
  Backends b;
  Rng rng(99);
  Store store;
  const int dim = 512, slots = 128;
  const TensorView norm = store.f32("attn.kv_norm.weight", {dim}, rng.normals(dim, 0.5f));
  const RopeTable rope = make_rope_table(10000.0, 64, 70000, nullptr);
  for (KvQuant variant : {KvQuant::clamp, KvQuant::e4m3}) {
    PairF ring = put(b, rng.normals(static_cast<size_t>(slots) * dim));
    PairF chain_ring = put(b, get(b, ring, kGpu));
    for (int64_t p : {0, 1, 127, 128, 4095, 65535}) {
      INFO("variant " << static_cast<int>(variant) << " position " << p);
      const std::vector<float> kv0 = rng.normals(dim, 3.0f);
      PairF kv = put(b, kv0), chain_kv = put(b, kv0);
      PairI pos = position(b, p);
      Ops& gpu = *b.gpu;
      gpu.rmsnorm(chain_kv[kGpu], norm, 1, dim, 1e-6, chain_kv[kGpu]);
      gpu.rope_dev(chain_kv[kGpu], 1, 1, dim, rope, pos[kGpu], false);
      gpu.kv_act_quant(chain_kv[kGpu], 1, dim, rope.rope_dim, variant);
      gpu.copy(chain_ring[kGpu] + p % slots * dim, chain_kv[kGpu], dim);
      for (int s : {kCpu, kGpu}) b.at(s).finish_kv_at(kv[s], norm, dim, 1e-6, rope, pos[s], variant, ring[s], slots);
      check_bitwise("finish_kv_at kv vs the op chain (cuda)", get(b, chain_kv, kGpu), get(b, kv, kGpu));
      check_bitwise("finish_kv_at ring vs the op chain (cuda)", get(b, chain_ring, kGpu), get(b, ring, kGpu));
      // As the rmsnorm twin (f32 sum of squares vs f64, ~1e-7; bound 1e-6; rope and the clamp
      // quantizer keep it); e4m3 as the compressor twin's (a rare flip at a rounding boundary).
      const bool e4m3 = variant == KvQuant::e4m3;
      check_close("finish_kv_at kv", get(b, kv, kCpu), get(b, kv, kGpu), e4m3 ? 5e-2 : 1e-6, e4m3 ? 0.25 : 1e-6);
      check_close("finish_kv_at ring", get(b, ring, kCpu), get(b, ring, kGpu), e4m3 ? 5e-2 : 1e-6, e4m3 ? 0.25 : 1e-6);
    }
  }
  // p = -1 (outside the table): NaN rope dims on CUDA (as rope_dev) and no ring slot
  // written; the CPU refuses it by name.
  PairF kv = put(b, rng.normals(dim)), ring = put(b, rng.normals(static_cast<size_t>(slots) * dim));
  const std::vector<float> ring0 = get(b, ring, kGpu);
  PairI neg = position(b, -1);
  b.gpu->finish_kv_at(kv[kGpu], norm, dim, 1e-6, rope, neg[kGpu], KvQuant::clamp, ring[kGpu], slots);
  const std::vector<float> got = get(b, kv, kGpu);
  CHECK(all_nan({got.end() - 64, got.end()}));
  CHECK(get(b, ring, kGpu) == ring0);
  CHECK_THROWS_AS(b.cpu->finish_kv_at(kv[kCpu], norm, dim, 1e-6, rope, neg[kCpu], KvQuant::clamp, ring[kCpu], slots),
                  Error);
}

// compress_at over consecutive positions from the same pending rows on both backends: the
// store rows and the pending rows after each step. On CUDA it must equal, bit for bit, what
// it fuses run on a mirror of the pending rows (both rows copied to pending row p mod r,
// then, when a block completes, compress_blocks of that block and the overlap shift), and a
// position that completes no block must leave the store untouched.
void run_compress_at(int ratio, bool rotate, uint64_t seed) {
  Backends b;
  Rng rng(seed);
  Store store;
  CompressorWeights c;
  c.ratio = ratio;
  c.overlap = ratio == 4;
  c.rotate = rotate;
  c.d = rotate ? 128 : 512;  // the indexer's Id, the attention's D (Flash)
  const int lc = c.latent(), slots = c.overlap ? 2 * ratio : ratio, n_blocks = 6;
  c.ape = store.f32("compressor.ape", {ratio, lc}, rng.normals(static_cast<size_t>(ratio) * lc, 0.5f));
  c.norm = store.f32("compressor.norm", {c.d}, rng.normals(c.d, 0.5f));
  const RopeTable rope = make_rope_table(160000.0, 64, int64_t{n_blocks} * ratio + 8, nullptr);
  Numerics num;
  const std::vector<float> no_score(static_cast<size_t>(slots) * lc, -std::numeric_limits<float>::infinity());
  PairF pend_kv = zeros(b, static_cast<size_t>(slots) * lc), pend_score = put(b, no_score);
  PairF mirror_kv = zeros(b, static_cast<size_t>(slots) * lc), mirror_score = put(b, no_score);
  PairF out = zeros(b, static_cast<size_t>(n_blocks) * c.d);
  PairF single = zeros(b, c.d);
  const size_t cur = c.overlap ? static_cast<size_t>(ratio) * lc : 0;
  for (int64_t p = 0; p < int64_t{n_blocks} * ratio; ++p) {
    PairF kv = put(b, rng.normals(lc)), score = put(b, rng.normals(lc, 2.0f));
    PairI pos = position(b, p);
    Ops& gpu = *b.gpu;
    const size_t slot = cur + static_cast<size_t>(p % ratio) * lc;
    gpu.copy(mirror_kv[kGpu] + slot, kv[kGpu], lc);
    gpu.copy(mirror_score[kGpu] + slot, score[kGpu], lc);
    const bool completes = (p + 1) % ratio == 0;
    if (completes) {
      gpu.compress_blocks(c, mirror_kv[kGpu] + cur, mirror_score[kGpu] + cur, 1, c.overlap ? mirror_kv[kGpu] : nullptr,
                          c.overlap ? mirror_score[kGpu] : nullptr, static_cast<int>(p / ratio), rope, 1e-6, num,
                          single[kGpu]);
      if (c.overlap) {
        gpu.copy(mirror_kv[kGpu], mirror_kv[kGpu] + cur, cur);
        gpu.copy(mirror_score[kGpu], mirror_score[kGpu] + cur, cur);
      }
    }
    const std::vector<float> out_before = get(b, out, kGpu);
    for (int s : {kCpu, kGpu})
      b.at(s).compress_at(c, pos[s], kv[s], score[s], pend_kv[s], pend_score[s], rope, 1e-6, num, out[s]);
    INFO("ratio " << ratio << " rotate " << rotate << " position " << p);
    const std::vector<float> got = get(b, out, kGpu);
    if (completes) {
      const std::vector<float> want = get(b, single, kGpu);
      const size_t row = static_cast<size_t>(p / ratio) * c.d;
      CHECK(std::equal(want.begin(), want.end(), got.begin() + static_cast<ptrdiff_t>(row)));
    } else {
      CHECK(got == out_before);
    }
    CHECK(get(b, pend_kv, kGpu) == get(b, mirror_kv, kGpu));
    CHECK(get(b, pend_score, kGpu) == get(b, mirror_score, kGpu));
    // The pending rows are copies (exact); the store as the compress_blocks twin: the
    // pool's f32 chain vs f64 plus expf ulps, ~1e-6 (bound 1e-5); the indexer's FP4
    // finishing flips a rounding step only at a boundary (bound of that twin: 1e-1, 0.6).
    check_close("compress_at pending kv", get(b, pend_kv, kCpu), get(b, pend_kv, kGpu), 0, 0);
    CHECK(get(b, pend_score, kCpu) == get(b, pend_score, kGpu));  // by value: -inf where never written
    check_close("compress_at store", get(b, out, kCpu), got, rotate ? 1e-1 : 1e-5, rotate ? 0.6 : 1e-5);
  }
}

TEST_CASE("compress_at twin: attention r4 / r128 and indexer r4 at consecutive positions") {
  run_compress_at(4, false, 96);
  run_compress_at(128, false, 97);
  run_compress_at(4, true, 98);
}

TEST_CASE("cuda: a plain decode step issues the same op calls with the same arguments at every position") {
  auto gpu = make_cuda_ops(0);
  test::check_position_independent_decode(*gpu);
}

TEST_CASE("cuda: a verify round of T rows issues the same op calls with the same arguments at every position") {
  auto gpu = make_cuda_ops(0);
  test::check_position_independent_verify(*gpu);
}

}  // namespace dsv4::twin

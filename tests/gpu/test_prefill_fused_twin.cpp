// CUDA vs CPU: the prefill's fused row ops (issue 13), positions host [rows] as the prefill
// passes them: on CUDA bit for bit the op chains they replace, at a prefill's row counts
// (1, 37, 64, 1,024: the register kernel's one-vector and four-vector launches and a last
// block short of four); against the CPU within the chained ops' twin bounds.
#include <numeric>

#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

namespace {

constexpr int kRowCounts[] = {1, 37, 64, 1024};

// Consecutive positions from p0, as a prefill (p0 = 0) or a later chunk passes them.
std::vector<int32_t> consecutive(int rows, int32_t p0) {
  std::vector<int32_t> p(static_cast<size_t>(rows));
  std::iota(p.begin(), p.end(), p0);
  return p;
}

}  // namespace

// Flash q (64 heads x 512, rope 64) and a small shape on the generic kernel (8 x 128).
TEST_CASE("head_rms_rope twin: head_rms then rope as one op at a prefill's rows, bit for bit") {
  Backends b;
  Rng rng(131);
  const RopeTable table = make_rope_table(10000.0, 64, 70000, nullptr);
  for (auto [heads, dim] : {std::pair{64, 512}, std::pair{8, 128}})
    for (int rows : kRowCounts) {
      INFO("rows " << rows << " heads " << heads << " dim " << dim);
      const std::vector<int32_t> pos = consecutive(rows, rng.uniform_int(0, 60000));
      const std::vector<float> v0 = rng.normals(static_cast<size_t>(rows) * heads * dim, 2.0f);
      PairF fused = put(b, v0), chain = put(b, v0);
      b.gpu->head_rms(chain[kGpu], rows * heads, dim, 1e-6);
      b.gpu->rope(chain[kGpu], rows, heads, dim, table, pos.data(), false);
      for (int s : {kCpu, kGpu}) b.at(s).head_rms_rope(fused[s], rows, heads, dim, 1e-6, table, pos.data());
      const std::vector<float> got = get(b, fused, kGpu);
      check_bitwise("head_rms_rope vs head_rms, rope (cuda)", get(b, chain, kGpu), got);
      check_close("head_rms_rope twin", get(b, fused, kCpu), got, 1e-6, 1e-6);  // head_rms's bound
    }
  std::vector<int32_t> bad = {70000};
  PairF v = put(b, rng.normals(512));
  CHECK_THROWS_AS(b.gpu->head_rms_rope(v[kGpu], 1, 1, 512, 1e-6, table, bad.data()), Error);
}

// Flash kv (D 512, rope 64), both quantizer variants.
TEST_CASE("finish_kv twin: rmsnorm, rope and kv_act_quant as one op at a prefill's rows, bit for bit") {
  Backends b;
  Rng rng(132);
  Store store;
  const int dim = 512;
  const TensorView norm = store.f32("attn.kv_norm.weight", {dim}, rng.normals(dim, 0.5f));
  const RopeTable rope = make_rope_table(10000.0, 64, 70000, nullptr);
  for (KvQuant variant : {KvQuant::clamp, KvQuant::e4m3})
    for (int rows : kRowCounts) {
      INFO("variant " << static_cast<int>(variant) << " rows " << rows);
      const std::vector<int32_t> pos = consecutive(rows, rng.uniform_int(0, 60000));
      const std::vector<float> kv0 = rng.normals(static_cast<size_t>(rows) * dim, 3.0f);
      PairF kv = put(b, kv0), chain = put(b, kv0);
      Ops& gpu = *b.gpu;
      gpu.rmsnorm(chain[kGpu], norm, rows, dim, 1e-6, chain[kGpu]);
      gpu.rope(chain[kGpu], rows, 1, dim, rope, pos.data(), false);
      gpu.kv_act_quant(chain[kGpu], rows, dim, rope.rope_dim, variant);
      for (int s : {kCpu, kGpu}) b.at(s).finish_kv(kv[s], norm, rows, dim, 1e-6, rope, pos.data(), variant);
      const std::vector<float> got = get(b, kv, kGpu);
      check_bitwise("finish_kv vs rmsnorm, rope, kv_act_quant (cuda)", get(b, chain, kGpu), got);
      // As the finish_kv_at twin: the rmsnorm twin's bound; e4m3 a rare flip at a rounding boundary.
      const bool e4m3 = variant == KvQuant::e4m3;
      check_close("finish_kv twin", get(b, kv, kCpu), got, e4m3 ? 5e-2 : 1e-6, e4m3 ? 0.25 : 1e-6);
    }
  std::vector<int32_t> bad = {-1};
  PairF v = put(b, rng.normals(dim));
  CHECK_THROWS_AS(b.gpu->finish_kv(v[kGpu], norm, 1, dim, 1e-6, rope, bad.data(), KvQuant::clamp), Error);
}

}  // namespace dsv4::twin

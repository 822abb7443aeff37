// CUDA vs CPU: RoPE application and inverse (MODEL.md §4.7).
#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

TEST_CASE("rope twin: same table entry, same f32 complex multiply (bit-exact)") {
  Backends b;
  Rng rng(12);
  const RopeTable table = make_rope_table(10000.0, 64, 300, nullptr);
  for (Ops* o : {b.cpu.get(), b.gpu.get()}) o->prepare(table);
  const int rows = 6, heads = 3, dim = 128;
  std::vector<int32_t> pos(rows);
  for (auto& p : pos) p = rng.uniform_int(0, 299);
  for (bool inverse : {false, true}) {
    PairF v = put(b, rng.normals(static_cast<size_t>(rows) * heads * dim));
    for (int s : {kCpu, kGpu}) b.at(s).rope(v[s], rows, heads, dim, table, pos.data(), inverse);
    // Identical f32 operations without FMA contraction on both sides: exact.
    check_close(inverse ? "rope inverse" : "rope forward", get(b, v, kCpu), get(b, v, kGpu), 0, 0);
  }
  std::vector<int32_t> bad = {300};
  CHECK_THROWS_AS(b.gpu->rope(nullptr, 1, 1, dim, table, bad.data(), false), Error);
}

}  // namespace dsv4::twin

// CUDA vs CPU: embedding (§4.1, host and device ids), argmax (D10, S9), add; and the
// no-device refusal.
#include <algorithm>
#include <cmath>

#include "tests/gpu/twin_harness.h"

namespace dsv4::twin {

TEST_CASE("embed and add twins (bit-exact)") {
  Backends b;
  Rng rng(91);
  Store store;
  std::vector<float> table = rng.normals(64 * 256);
  const TensorView t = store.bf16("embed.weight", {64, 256}, table);
  std::vector<int32_t> ids = {5, 63, 0, 5};
  PairF h = zeros(b, 4 * 4 * 256);
  for (int s : {kCpu, kGpu}) b.at(s).embed(t, ids.data(), 4, 4, h[s]);
  check_close("embed", get(b, h, kCpu), get(b, h, kGpu), 0, 0);
  // embed_dev (ids in backend memory, issue 12): the same rows; a bad id gives a NaN row.
  PairI dids = put_i32(b, ids);
  PairF hd = zeros(b, h.n);
  for (int s : {kCpu, kGpu}) b.at(s).embed_dev(t, dids[s], 4, 4, hd[s]);
  check_close("embed_dev vs embed", get(b, h, kGpu), get(b, hd, kGpu), 0, 0);
  check_close("embed_dev", get(b, hd, kCpu), get(b, hd, kGpu), 0, 0);
  PairI bad_dev = put_i32(b, {64});
  b.gpu->embed_dev(t, bad_dev[kGpu], 1, 1, hd[kGpu]);
  const std::vector<float> poisoned = get(b, hd, kGpu);
  CHECK(std::all_of(poisoned.begin(), poisoned.begin() + 256, [](float v) { return std::isnan(v); }));
  PairF x = put(b, rng.normals(h.n));
  for (int s : {kCpu, kGpu}) b.at(s).add(h[s], x[s], h.n);
  check_close("add", get(b, h, kCpu), get(b, h, kGpu), 0, 0);
  std::vector<int32_t> bad = {64};
  CHECK_THROWS_AS(b.gpu->embed(t, bad.data(), 1, 4, h[kGpu]), Error);
}

TEST_CASE("argmax twin: lowest index on ties, -0 == +0, -1 on NaN") {
  Backends b;
  Rng rng(92);
  const int rows = 5;
  const int64_t n = 129280;  // the Flash vocabulary
  std::vector<float> logits = rng.normals(static_cast<size_t>(rows) * n);
  logits[0 * n + 77] = 50.0f;  // row 0: tie between 77 and 100000 -> 77
  logits[0 * n + 100000] = 50.0f;
  logits[1 * n + 5] = NAN;     // row 1: NaN -> -1
  for (int64_t i = 0; i < n; ++i) logits[2 * n + i] = -1.0f;  // row 2: all equal -> 0
  logits[3 * n + 9] = 0.0f;    // row 3: all negative except -0 at 3 and +0 at 9 -> 3
  logits[3 * n + 3] = -0.0f;
  for (int64_t i = 0; i < n; ++i)
    if (i != 3 && i != 9) logits[3 * n + i] = -std::fabs(logits[3 * n + i]) - 1.0f;
  PairF l = put(b, logits);
  std::vector<int32_t> ref(rows), got(rows);
  b.cpu->argmax(l[kCpu], rows, n, ref.data());
  b.gpu->argmax(l[kGpu], rows, n, got.data());
  CHECK(ref == got);
  CHECK(got[0] == 77);
  CHECK(got[1] == -1);
  CHECK(got[2] == 0);
  CHECK(got[3] == 3);
}

// Run by the gpu_no_device ctest with CUDA_VISIBLE_DEVICES=-1 (skipped otherwise).
TEST_CASE("make_cuda_ops refuses with an Error when no usable device is visible" * doctest::skip()) {
  CHECK(cuda_backend_built());
  try {
    make_cuda_ops(0);
    FAIL("make_cuda_ops succeeded without a visible device");
  } catch (const Error& e) {
    MESSAGE(std::string(e.what()));
    CHECK(std::string(e.what()).find("backend: cuda") != std::string::npos);
  }
}

}  // namespace dsv4::twin

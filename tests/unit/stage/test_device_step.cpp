// Issue 12, step 1 of a CUDA graph per decode step: a plain decode step reads its
// position and token from the StepState (backend memory), so the op calls it issues, with
// every argument, are the same at every position; and Ops::decode_index (the backend's
// index row of the device position) gives exactly the host rows of stage/attention_index.
#include <doctest/doctest.h>

#include "stage/attention_index.h"
#include "stage_harness.h"
#include "tests/unit/stage/decode_calls.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Ops::decode_index at p against step_index's plain decode row: the same columns, -1 past
// step_index's width, the same n_visible.
void check_decode_index(Ops& ops, int ratio, int window, int topk, int cap_blocks, int64_t p) {
  std::vector<int32_t> want;
  const MergedIndex host = step_index(ratio, p, 1, window, topk, -1, want);
  const MergedIndex shape = decode_index_shape(ratio, window, topk, cap_blocks);
  REQUIRE(shape.width >= host.width);
  IBuf pos = ops.alloc_i32(1), idx = ops.alloc_i32(static_cast<size_t>(shape.width)), nv = ops.alloc_i32(1);
  const int32_t p32 = static_cast<int32_t>(p);
  ops.upload_i32(pos.data(), &p32, 1);
  ops.fill_i32(idx.data(), 7777, idx.size());  // every column must be written
  ops.decode_index(pos.data(), ratio, window, shape.tail_width, idx.data(), ratio == 4 ? nv.data() : nullptr);
  std::vector<int32_t> got(idx.size());
  ops.download_i32(got.data(), idx.data(), got.size());
  want.resize(static_cast<size_t>(shape.width), -1);
  INFO("ratio " << ratio << " window " << window << " position " << p);
  CHECK(got == want);
  if (ratio == 4) {
    int32_t n = -1;
    ops.download_i32(&n, nv.data(), 1);
    CHECK(n == host.n_visible.at(0));
  }
}

}  // namespace

TEST_CASE("decode_index gives step_index's decode rows at the fixed decode width") {
  auto ops = make_cpu_ops();
  // Flash shapes: window 128, index_topk 512, ratios 0 / 4 / 128, max_seq 65536.
  constexpr int64_t kMaxSeq = 65536;
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < 1100; ++p) positions.push_back(p);
  for (int64_t p : {2047, 2048, 2049, 4095, 4096, 4097, 8191, 16383, 32767, 65534, 65535}) positions.push_back(p);
  for (int ratio : {0, 4, 128})
    for (int64_t p : positions)
      check_decode_index(*ops, ratio, 128, 512, ratio > 0 ? static_cast<int>(kMaxSeq / ratio) : 0, p);
  // The tiny model's shapes: window 16, index_topk 8, ratios 0 / 4 / 16, max_seq 256.
  for (int ratio : {0, 4, 16})
    for (int64_t p = 0; p < 256; ++p) check_decode_index(*ops, ratio, 16, 8, ratio > 0 ? 256 / ratio : 0, p);
}

TEST_CASE("decode_index refuses a position whose blocks exceed the tail width") {
  auto ops = make_cpu_ops();
  IBuf pos = ops->alloc_i32(1), idx = ops->alloc_i32(16 + 4);
  const int32_t p = 16 * 5 - 1;  // 5 blocks of 16 completed, the tail holds 4
  ops->upload_i32(pos.data(), &p, 1);
  CHECK_THROWS_WITH_AS(ops->decode_index(pos.data(), 16, 16, 4, idx.data(), nullptr),
                       doctest::Contains("more than the tail width 4"), Error);
}

TEST_CASE("a plain decode step issues the same op calls with the same arguments at every position") {
  auto cpu = make_cpu_ops();
  check_position_independent_decode(*cpu);
}

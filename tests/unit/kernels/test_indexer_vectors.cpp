// Lightning indexer scores and top-k (MODEL.md §4.18, §6.5, D7, D10) against indexer.json.
#include <doctest/doctest.h>

#include "kernels/cpu/indexer.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

// Runs cpu_indexer_topk over every row of a case and returns (scores, idx, blocks).
struct IndexerRun {
  std::vector<float> scores;
  std::vector<int32_t> idx, blocks;
};

IndexerRun run_case(const VectorCase& c, const std::vector<int32_t>& n_visible, int base) {
  const VectorArray q = c.input("q");
  const int rows = static_cast<int>(q.dim(0)), heads = c.param<int>("heads"),
            dim = c.param<int>("head_dim"), nb = c.param<int>("nb"), k = c.param<int>("k");
  const std::vector<float> qf = q.f32(), w = c.input("w").f32(), keys = c.input("k_blocks").f32();
  const float wscale = c.param<float>("wscale");
  IndexerRun run;
  run.scores.resize(static_cast<size_t>(rows) * nb);
  for (int t = 0; t < rows; ++t)
    cpu_indexer_scores(qf.data() + t * heads * dim, w.data() + t * heads, heads, dim, wscale,
                       keys.data(), nb, run.scores.data() + t * nb);
  // Written at column 1 of a wider row to exercise idx_stride / col0.
  const int stride = k + 2;
  std::vector<int32_t> wide(static_cast<size_t>(rows) * stride, 77);
  cpu_indexer_topk(qf.data(), w.data(), rows, heads, dim, wscale, keys.data(), n_visible.data(),
                   k, base, wide.data(), stride, 1);
  for (int t = 0; t < rows; ++t) {
    CHECK(wide[t * stride] == 77);  // columns outside [col0, col0 + width) untouched
    CHECK(wide[t * stride + k + 1] == 77);
    for (int j = 0; j < k; ++j) {
      const int32_t v = wide[t * stride + 1 + j];
      run.idx.push_back(v);
      run.blocks.push_back(v < 0 ? -1 : v - base);
    }
  }
  return run;
}

}  // namespace

TEST_CASE("indexer prefill: causal limit (t+1)/4, top-k by (score desc, block asc), idx = j + s") {
  for (const VectorCase& c : load_cases("indexer.json", "indexer_prefill")) {
    SUBCASE(c.name.c_str()) {
      const int s = c.param<int>("s"), ratio = c.param<int>("ratio");
      std::vector<int32_t> lim(s);
      for (int t = 0; t < s; ++t) lim[t] = (t + 1) / ratio;
      compare_key(c, "lim", lim);
      const IndexerRun run = run_case(c, lim, s);
      // f64 expected vs f64 chain rounded to f32: bound from the vector file.
      compare_key(c, "scores", run.scores);
      compare_key(c, "blocks", run.blocks);
      compare_key(c, "idx", run.idx);
    }
  }
}

TEST_CASE("indexer decode: all nb blocks visible, ties to the lower block, idx = j + W") {
  for (const VectorCase& c : load_cases("indexer.json", "indexer_decode")) {
    SUBCASE(c.name.c_str()) {
      const IndexerRun run = run_case(c, {c.param<int>("nb")}, c.param<int>("W"));
      compare_key(c, "scores", run.scores);
      compare_key(c, "blocks", run.blocks);
      compare_key(c, "idx", run.idx);
    }
  }
}

TEST_CASE("indexer top-k: equal scores keep ascending block order, unfilled slots are -1") {
  // One head, dim 2, wscale 1; keys 0..4 with dots 1, 3, 3, 0 (relu of -2), 3.
  const std::vector<float> q = {1.0f, 0.0f}, w = {1.0f};
  const std::vector<float> keys = {1, 0, 3, 0, 3, 0, -2, 0, 3, 0};
  std::vector<int32_t> idx(6);
  const int32_t n5[] = {5};
  cpu_indexer_topk(q.data(), w.data(), 1, 1, 2, 1.0f, keys.data(), n5, 6, 0, idx.data(), 6, 0);
  CHECK(idx == std::vector<int32_t>{1, 2, 4, 0, 3, -1});
  const int32_t n2[] = {2};
  cpu_indexer_topk(q.data(), w.data(), 1, 1, 2, 1.0f, keys.data(), n2, 3, 10, idx.data(), 6, 0);
  CHECK(std::vector<int32_t>(idx.begin(), idx.begin() + 3) == std::vector<int32_t>{11, 10, -1});
}

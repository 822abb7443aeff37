// Window and coarse index laws (MODEL.md §4.15, §4.17, §6.3, Appendix A) against
// index_laws.json, and the verify redirect (SPECDECODE.md §4.2).
#include <doctest/doctest.h>

#include <numeric>

#include "kernels/index_laws.h"
#include "base/error.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("window prefill: row t lists max(0,t-W+1)..t then -1 up to min(s,W) (index_laws.json)") {
  for (const VectorCase& c : load_cases("index_laws.json", "window_prefill")) {
    SUBCASE(c.name.c_str()) {
      compare_key(c, "idx", window_prefill_rows(c.param<int>("s"), c.param<int>("W")));
    }
  }
}

TEST_CASE("window decode: ring slots oldest first, -1 pads while p < W-1 (index_laws.json)") {
  for (const VectorCase& c : load_cases("index_laws.json", "window_decode")) {
    SUBCASE(c.name.c_str()) {
      const int W = c.param<int>("W");
      std::vector<int32_t> idx;
      std::vector<int64_t> ring_positions;
      for (const int64_t p : c.param<std::vector<int64_t>>("positions")) {
        const std::vector<int32_t> row = window_decode_row(p, W);
        REQUIRE(row.size() == static_cast<size_t>(W));
        idx.insert(idx.end(), row.begin(), row.end());
        // §6.3: slot s holds the latest position q <= p with q mod W == s.
        for (const int32_t s : row) ring_positions.push_back(s < 0 ? -1 : p - ((p - s) % W));
      }
      compare_key(c, "idx", idx);
      compare_key(c, "ring_positions", ring_positions);
    }
  }
}

TEST_CASE("coarse index: prefill s+j for j < (t+1)/r, decode W+j for j < (p+1)/r (index_laws.json)") {
  for (const VectorCase& c : load_cases("index_laws.json", "coarse_index")) {
    SUBCASE(c.name.c_str()) {
      const int r = c.param<int>("ratio"), s = c.param<int>("s"), W = c.param<int>("W");
      compare_key(c, "prefill_idx", coarse_prefill_rows(s, r));
      for (const int64_t p : c.param<std::vector<int64_t>>("decode_positions"))
        compare_key(c, "decode_idx_p" + std::to_string(p), coarse_decode_row(p, r, W));
    }
  }
}

TEST_CASE("Appendix A: decode p = 130, W = 128 is [3..127, 0, 1, 2] = prefill row 130 mod W") {
  const std::vector<int32_t> row = window_decode_row(130, 128);
  std::vector<int32_t> expected(125);
  std::iota(expected.begin(), expected.end(), 3);
  expected.insert(expected.end(), {0, 1, 2});
  CHECK(row == expected);
  const std::vector<int32_t> prefill = window_prefill_rows(131, 128);  // [131, 128]
  for (int k = 0; k < 128; ++k) {
    CHECK(prefill[130 * 128 + k] == 3 + k);  // b_t = 3, positions 3..130
    CHECK(row[k] == prefill[130 * 128 + k] % 128);
  }
}

TEST_CASE("verify redirect: positions >= pos0 go to trans_base + (q - pos0), older to q mod W") {
  // W = 4, round from pos0 = 5, transient rows from 10 (SPECDECODE §4.2).
  CHECK(window_verify_row(5, 5, 4, 10) == std::vector<int32_t>{2, 3, 0, 10});   // q 2..5
  CHECK(window_verify_row(6, 5, 4, 10) == std::vector<int32_t>{3, 0, 10, 11});  // q 3..6
  CHECK(window_verify_row(8, 5, 4, 10) == std::vector<int32_t>{10, 11, 12, 13});  // q 5..8
  // Short context: pads stay where the decode law puts them.
  CHECK(window_verify_row(2, 1, 4, 7) == std::vector<int32_t>{0, 7, 8, -1});
}

TEST_CASE("verify redirect with no in-round position ahead of p equals the decode row") {
  // pos0 = p: only q = p is in-round; every other entry must be the decode law's slot.
  for (const int64_t p : {0, 3, 15, 16, 40}) {
    const std::vector<int32_t> dec = window_decode_row(p, 16);
    const std::vector<int32_t> ver = window_verify_row(p, p, 16, 100);
    for (int k = 0; k < 16; ++k) {
      if (dec[k] == p % 16 && dec[k] >= 0) CHECK(ver[k] == 100);
      else CHECK(ver[k] == dec[k]);
    }
  }
}

TEST_CASE("index laws refuse bad sizes with a message") {
  CHECK_THROWS_AS(window_decode_row(3, 0), Error);
  CHECK_THROWS_AS(coarse_prefill_rows(10, 0), Error);
  CHECK_THROWS_AS(window_verify_row(3, 5, 16, 20), Error);
}

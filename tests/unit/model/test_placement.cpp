// Layer placement (CHECKPOINT.md §5.7, ARCHITECTURE.md "Ranks and roles"): the §5.7 table
// splits computed from the Flash census, a brute-force cross-check, and the refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>

#include "error_text.h"
#include "model/census.h"
#include "model/placement.h"
#include "model/presets.h"

using namespace dsv4;
using dsv4::test::error_text;
using dsv4::test::mentions;

namespace {

struct Split {
  std::vector<LayerRange> ranges;
  std::vector<double> gib;  // resident GiB per rank
};

// Placement inputs from a census: trunk layer bytes, embed on rank 0, head + norm +
// hc_head + every drafter block on the last rank (§5.7).
Split place(const ModelConfig& c, const CensusOptions& o, int ranks) {
  const auto census = tensor_census(c, o);
  const int L = c.num_hidden_layers;
  std::vector<uint64_t> layers(static_cast<size_t>(L), 0);
  uint64_t first = 0, last = 0;
  for (const auto& e : census) {
    if (e.layer_id >= 0 && e.layer_id < L) layers[static_cast<size_t>(e.layer_id)] += e.bytes();
    else if (e.cls == ByteClass::embed) first += e.bytes();
    else last += e.bytes();
  }
  Split s;
  s.ranges = balance_layers(layers, ranks, first, last);
  for (size_t r = 0; r < s.ranges.size(); ++r) {
    uint64_t b = (r == 0 ? first : 0) + (r + 1 == s.ranges.size() ? last : 0);
    for (int l = s.ranges[r].begin; l < s.ranges[r].end; ++l) b += layers[static_cast<size_t>(l)];
    s.gib.push_back(static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
  }
  return s;
}

// Ranges written as the spec's inclusive "a-b" layer lists.
void check_split(const Split& s, const std::vector<std::pair<int, int>>& inclusive,
                 const std::vector<double>& gib) {
  REQUIRE(s.ranges.size() == inclusive.size());
  for (size_t r = 0; r < inclusive.size(); ++r) {
    CAPTURE(r);
    CHECK(s.ranges[r].begin == inclusive[r].first);
    CHECK(s.ranges[r].end == inclusive[r].second + 1);
    // §5.7 prints GiB with two decimals.
    CHECK(std::fabs(s.gib[r] - gib[r]) <= 0.005);
  }
}

CensusOptions trunk(ExpertRecipe r) {
  CensusOptions o;
  o.trunk_experts = r;
  return o;
}

}  // namespace

TEST_CASE("§5.7 splits of Flash computed from the census") {
  const ModelConfig flash = flash_preset();
  SUBCASE("NVFP4 + DSpark, 2 GPUs") {
    check_split(place(flash, trunk(ExpertRecipe::nvfp4), 2), {{0, 22}, {23, 42}}, {81.96, 81.52});
  }
  SUBCASE("NVFP4 + DSpark, 3 GPUs") {
    check_split(place(flash, trunk(ExpertRecipe::nvfp4), 3), {{0, 14}, {15, 30}, {31, 42}},
                {53.79, 56.33, 53.35});
  }
  SUBCASE("NVFP4 + DSpark, 4 GPUs") {
    check_split(place(flash, trunk(ExpertRecipe::nvfp4), 4),
                {{0, 10}, {11, 22}, {23, 34}, {35, 42}}, {39.71, 42.25, 42.25, 39.27});
  }
  SUBCASE("MXFP4 (official) + DSpark, 2 GPUs") {
    check_split(place(flash, trunk(ExpertRecipe::mxfp4), 2), {{0, 22}, {23, 42}}, {77.65, 77.77});
  }
  SUBCASE("NVFP4, no drafter, 2 GPUs") {
    CensusOptions o = trunk(ExpertRecipe::nvfp4);
    o.drafter_blocks = 0;
    check_split(place(flash, o, 2), {{0, 21}, {22, 42}}, {78.43, 74.94});
  }
  SUBCASE("NVFP4 + NextN, 2 GPUs") {
    ModelConfig nextn = flash;
    nextn.dspark = DsparkConfig{};
    nextn.compress_ratios.resize(44);
    CensusOptions o = trunk(ExpertRecipe::nvfp4);
    o.drafter_blocks = 1;
    check_split(place(nextn, o, 2), {{0, 21}, {22, 42}}, {78.43, 78.28});
  }
}

TEST_CASE("balance_layers equals brute force: min of the max, ties to the earliest cuts") {
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 200; ++trial) {
    const int L = 2 + static_cast<int>(rng() % 7);  // 2..8 layers
    const int P = 1 + static_cast<int>(rng() % std::min(L, 4));
    std::vector<uint64_t> bytes(static_cast<size_t>(L));
    for (auto& b : bytes) b = 1 + rng() % 4;  // few distinct values: many ties
    const uint64_t first = rng() % 3, last = rng() % 5;
    // Every cut vector, in lexicographic order; keep the first with the smallest max.
    uint64_t best = UINT64_MAX;
    std::vector<int> best_cuts;
    std::vector<int> cuts(static_cast<size_t>(P - 1));
    std::function<void(int, int)> walk = [&](int r, int from) {
      if (r == P - 1) {
        uint64_t worst = 0;
        int begin = 0;
        for (int k = 0; k < P; ++k) {
          const int end = k < P - 1 ? cuts[static_cast<size_t>(k)] : L;
          uint64_t s = (k == 0 ? first : 0) + (k == P - 1 ? last : 0);
          for (int l = begin; l < end; ++l) s += bytes[static_cast<size_t>(l)];
          worst = std::max(worst, s);
          begin = end;
        }
        if (worst < best) best = worst, best_cuts = cuts;
        return;
      }
      for (int c = from; c <= L - (P - 1 - r); ++c) {
        cuts[static_cast<size_t>(r)] = c;
        walk(r + 1, c + 1);
      }
    };
    walk(0, 1);
    const auto got = balance_layers(bytes, P, first, last);
    REQUIRE(static_cast<int>(got.size()) == P);
    CAPTURE(trial);
    for (int k = 0; k < P - 1; ++k) CHECK(got[static_cast<size_t>(k)].end == best_cuts[static_cast<size_t>(k)]);
    CHECK_NOTHROW(validate_ranges(got, L, P));
  }
}

TEST_CASE("placement refusals name the problem") {
  const std::vector<uint64_t> bytes{5, 5, 5};
  CHECK(mentions(error_text([&] { balance_layers(bytes, 0, 0, 0); }), "0 ranks"));
  CHECK(mentions(error_text([&] { balance_layers(bytes, 4, 0, 0); }), "4 ranks", "3 trunk layers"));
  using R = std::vector<LayerRange>;
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 2}, {2, 2}, {2, 3}}, 3, 3); }),
                 "rank 1", "empty"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 2}, {1, 3}}, 3, 2); }), "rank 1",
                 "overlaps"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 1}, {2, 3}}, 3, 2); }), "rank 1",
                 "[1, 2) unassigned"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 1}, {1, 2}}, 3, 2); }), "[2, 3)",
                 "no rank"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 2}, {2, 4}}, 3, 2); }), "rank 1",
                 "outside"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 3}}, 3, 2); }), "1 layer ranges",
                 "2 ranks"));
  CHECK(mentions(error_text([] { validate_ranges(R{{0, 1}, {1, 2}, {2, 3}, {3, 3}}, 3, 4); }),
                 "P <= L"));
  CHECK_NOTHROW(validate_ranges(R{{0, 1}, {1, 3}}, 3, 2));
}

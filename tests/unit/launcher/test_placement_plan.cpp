// The run's layer split (CHECKPOINT.md §5.7): balanced by resident bytes, or listed and
// validated; P > L, empty / overlapping / out-of-bounds ranges and a count != P refused.
#include <doctest/doctest.h>

#include <numeric>
#include <string>

#include "launcher/placement_plan.h"
#include "model/checkpoint.h"
#include "base/error.h"

using namespace dsv4;

namespace {
std::string refusal(const std::vector<LayerRange>& listed, const PlacementBytes& b, int ranks) {
  try {
    plan_placement(listed, b, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool same(const std::vector<LayerRange>& a, const std::vector<LayerRange>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  return true;
}
}  // namespace

TEST_CASE("auto placement minimizes the largest rank's resident bytes") {
  PlacementBytes b;
  b.layers = {10, 10, 10, 10};
  CHECK(same(plan_placement({}, b, 2), {{0, 2}, {2, 4}}));
  // Rank 0 carries 25 more (the embedding): [0,1)|[1,4) holds max(35, 30) = 35 against
  // [0,2)|[2,4)'s max(45, 20) = 45.
  b.first = 25;
  CHECK(same(plan_placement({}, b, 2), {{0, 1}, {1, 4}}));
  CHECK(same(plan_placement({}, b, 1), {{0, 4}}));
}

TEST_CASE("listed placement is validated against L and P") {
  PlacementBytes b;
  b.layers.assign(7, 1);  // L = 7, as the tiny model
  CHECK(same(plan_placement({{0, 5}, {5, 7}}, b, 2), {{0, 5}, {5, 7}}));
  CHECK(refusal({}, b, 8).rfind("placement: ", 0) == 0);                 // P > L
  CHECK(refusal({{0, 3}, {2, 7}}, b, 2).rfind("placement: ", 0) == 0);   // overlapping
  CHECK(refusal({{0, 0}, {0, 7}}, b, 2).rfind("placement: ", 0) == 0);   // empty
  CHECK(refusal({{0, 3}, {3, 9}}, b, 2).rfind("placement: ", 0) == 0);   // out of bounds
  CHECK(refusal({{0, 3}, {4, 7}}, b, 2).rfind("placement: ", 0) == 0);   // a gap
  CHECK(refusal({{0, 3}, {3, 7}}, b, 3).rfind("placement: ", 0) == 0);   // count != P
  CHECK(refusal({{0, 3}, {3, 7}}, b, 3).find("3 ranks, 7 trunk layers") != std::string::npos);
}

TEST_CASE("placement bytes of the tiny checkpoint follow the census (CHECKPOINT.md §2.6, §6.1)") {
  Checkpoint ckpt(DSV4_FIXTURES_DIR "/tiny");
  const PlacementBytes off = placement_bytes(ckpt, false);
  REQUIRE(off.layers.size() == 7);
  // embed.weight BF16 [512, 256]
  CHECK(off.first == 512u * 256u * 2u);
  // head.weight BF16 [512, 256] + norm.weight BF16 [256] + hc_head_fn F32 [4, 1024]
  // + hc_head_base F32 [4] + hc_head_scale F32 [1]
  CHECK(off.last == 512u * 256u * 2u + 256u * 2u + 4u * 1024u * 4u + 4u * 4u + 4u);
  for (uint64_t l : off.layers) CHECK(l > 0);
  // With the drafter the head rank adds every mtp.* tensor and its own embedding copy, so
  // everything together is the census total (21,153,332 B) plus that copy.
  const PlacementBytes on = placement_bytes(ckpt, true);
  const uint64_t layers = std::accumulate(on.layers.begin(), on.layers.end(), uint64_t{0});
  CHECK(layers + on.first + on.last == 21153332u + 512u * 256u * 2u);
  CHECK(ckpt.shards_opened().empty());  // planning reads the index only
}

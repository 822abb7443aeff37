// The truncated Flash preset (flash_trunk_preset, for decode benchmarks): real layer
// kinds and dimensions, globals, no drafter. Byte totals are quoted from CHECKPOINT.md
// §5.1 / §5.2, never produced by the code under test.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "model/census.h"
#include "model/config.h"
#include "base/error.h"
#include "model/presets.h"
#include "error_text.h"

using namespace dsv4;

namespace {

uint64_t census_bytes(const std::vector<CensusEntry>& census) {
  uint64_t sum = 0;
  for (const auto& e : census) sum += e.bytes();
  return sum;
}

// Entries equal field by field (name, dtype, shape, class, layer id).
bool same_entry(const CensusEntry& a, const CensusEntry& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.cls == b.cls &&
         a.layer_id == b.layer_id;
}

}  // namespace

TEST_CASE("flash trunk preset: config validates, keeps the real kinds, drops the drafter") {
  for (int n : {1, 2, 3, 4, 43}) {
    CAPTURE(n);
    const ModelConfig c = flash_trunk_preset(n);
    CHECK_NOTHROW(validate_model_config(c));
    CHECK(c.num_hidden_layers == n);
    CHECK_FALSE(c.dspark.present);
    REQUIRE(c.compress_ratios.size() == static_cast<size_t>(n));
    // §5.1 kinds: 0-1 A (r 0, hash), 2 B (r 4, hash), then D (r 128) / C (r 4) alternating.
    const std::vector<int> flash_ratios = {0, 0, 4, 128, 4, 128, 4};
    for (int l = 0; l < n && l < static_cast<int>(flash_ratios.size()); ++l) {
      CHECK(c.ratio(l) == flash_ratios[static_cast<size_t>(l)]);
      CHECK(c.is_hash(l) == (l < 3));
    }
    // config.json written for the checkpoint reads back with no dspark_* keys.
    const ModelConfig back = parse_model_config(model_config_json(c), "written config.json");
    CHECK(back.num_hidden_layers == n);
    CHECK(back.compress_ratios == c.compress_ratios);
    CHECK(back.num_hash_layers == c.num_hash_layers);
    CHECK_FALSE(back.dspark.present);
    CHECK(census_drafter_blocks(back, CensusOptions{}) == 0);
  }
}

TEST_CASE("flash trunk preset: census = globals + the first N blocks of the Flash census") {
  const ModelConfig full = flash_preset();
  for (ExpertRecipe r : {ExpertRecipe::nvfp4, ExpertRecipe::mxfp4}) {
    CensusOptions o;
    o.trunk_experts = r;
    const std::vector<CensusEntry> full_census = tensor_census(full, o);
    for (int n : {1, 4, 43}) {
      CAPTURE(n);
      std::vector<CensusEntry> want;
      for (const auto& e : full_census)
        if (e.layer_id < n) want.push_back(e);  // globals (-1) and trunk layers 0..n-1
      const std::vector<CensusEntry> got = tensor_census(flash_trunk_preset(n), o);
      REQUIRE(got.size() == want.size());
      size_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i) mismatches += same_entry(got[i], want[i]) ? 0 : 1;
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("flash trunk preset: byte totals from CHECKPOINT §5.1 / §5.2 (NVFP4)") {
  const uint64_t kGlobals = 2118393876;  // §5.2 embed + head + norm + hc_head_*
  const uint64_t kA = 3767481688, kB = 3797388376, kD = 3769929048;  // §5.1 kinds
  CensusOptions o;
  CHECK(census_bytes(tensor_census(flash_trunk_preset(1), o)) == kA + kGlobals);
  CHECK(census_bytes(tensor_census(flash_trunk_preset(4), o)) == 2 * kA + kB + kD + kGlobals);
  // §5.2: the NVFP4 trunk of 43 blocks is 162,554,611,912 B.
  CHECK(census_bytes(tensor_census(flash_trunk_preset(43), o)) == 162554611912ull + kGlobals);
}

TEST_CASE("flash trunk preset: N outside [1, 43] is refused naming the count") {
  for (int n : {0, -1, 44}) {
    CAPTURE(n);
    const std::string msg = test::error_text([n] { flash_trunk_preset(n); });
    CHECK(test::mentions(msg, "trunk layers = " + std::to_string(n), "[1, 43]"));
  }
}

TEST_CASE("flash trunk spec preset: dspark_* keys on the last trunk layers, no mtp.* written") {
  for (int n : {1, 2, 4}) {
    CAPTURE(n);
    const ModelConfig c = flash_trunk_spec_preset(n);
    CHECK_NOTHROW(validate_model_config(c));
    REQUIRE(c.dspark.present);
    CHECK(c.dspark.block_size == 5);
    CHECK(c.dspark.noise_token_id == 128799);
    const std::vector<int> targets = n == 1 ? std::vector<int>{0}
                                     : n == 2 ? std::vector<int>{0, 1}
                                              : std::vector<int>{1, 2, 3};
    CHECK(c.dspark.target_layer_ids == targets);
    CHECK(c.compress_ratios.size() == static_cast<size_t>(n) + targets.size());
    const ModelConfig back = parse_model_config(model_config_json(c), "written config.json");
    CHECK(back.dspark.target_layer_ids == targets);
    CensusOptions none;
    none.drafter_blocks = 0;  // what dsv4-mkckpt --dspark-keys writes
    CHECK(census_bytes(tensor_census(c, none)) == census_bytes(tensor_census(flash_trunk_preset(n), {})));
  }
}

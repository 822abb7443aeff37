// The expert-recipe rule of base/expert_recipe.h (CHECKPOINT.md C1, R10, §3.6, §3.7).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "base/expert_recipe.h"

using dsv4::ExpertRecipe;

TEST_CASE("the packed weight's stored dtype names the recipe: U8 NVFP4, I8 MXFP4 (R10)") {
  CHECK(dsv4::expert_recipe_of_packed_dtype("U8") == ExpertRecipe::nvfp4);
  CHECK(dsv4::expert_recipe_of_packed_dtype("I8") == ExpertRecipe::mxfp4);
  for (const char* other : {"F8_E4M3", "F8_E8M0", "BF16", "F32", "I64", "u8", ""})
    CHECK_FALSE(dsv4::expert_recipe_of_packed_dtype(other).has_value());
}

TEST_CASE("the block-scale sibling names the recipe; neither or both is no recipe (C1)") {
  auto with = [](std::set<std::string> stored) {
    return dsv4::expert_recipe_of_scale_sibling(
        [&](const char* suffix) { return stored.count(suffix) > 0; });
  };
  CHECK(with({".weight_scale", ".weight_scale_2"}) == ExpertRecipe::nvfp4);
  CHECK(with({".scale"}) == ExpertRecipe::mxfp4);
  CHECK_FALSE(with({}).has_value());
  CHECK_FALSE(with({".scale", ".weight_scale"}).has_value());
}

TEST_CASE("recipe formats: MXFP4 groups of 32 with E8M0 .scale, NVFP4 of 16 with scale_2") {
  const dsv4::ExpertFormat& mx = dsv4::expert_format(ExpertRecipe::mxfp4);
  const dsv4::ExpertFormat& nv = dsv4::expert_format(ExpertRecipe::nvfp4);
  CHECK(std::string(mx.name) == "MXFP4");
  CHECK(mx.group == 32);
  CHECK_FALSE(mx.scale_2);
  CHECK(std::string(nv.name) == "NVFP4");
  CHECK(nv.group == 16);
  CHECK(nv.scale_2);
}

// Grouped output projection (MODEL.md §4.21 steps 2-4, L-bf16 of §3.3) against
// grouped_output_projection.json, with dense_act f32 and bf16.
#include <doctest/doctest.h>

#include "kernels/cpu/linear.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

TEST_CASE("grouped wo_a (group g owns contiguous heads) then wo_b, L-bf16 activations, match the vectors") {
  for (const VectorCase& c : load_cases("grouped_output_projection.json", "grouped_output_projection")) {
    SUBCASE(c.name.c_str()) {
      const int s = c.param<int>("s"), heads = c.param<int>("heads"),
                head_dim = c.param<int>("head_dim"), groups = c.param<int>("o_groups"),
                rank = c.param<int>("o_lora_rank"), hidden = c.param<int>("hidden");
      const std::string act = c.param<std::string>("dense_act");
      REQUIRE((act == "f32" || act == "bf16"));
      const bool act_bf16 = act == "bf16";
      const int group_in = heads * head_dim / groups;
      std::vector<float> og(s * groups * rank), out(s * hidden);
      cpu_grouped_lbf16(c.input("wo_a").f32().data(), rank, group_in, c.input("o").f32().data(), s,
                        groups, act_bf16, og.data());
      cpu_lbf16(c.input("wo_b").f32().data(), hidden, groups * rank, og.data(), groups * rank, s,
                act_bf16, out.data(), hidden);
      // f32 accumulation vs f64: bounds from the vector file.
      compare_key(c, "og", og);
      compare_key(c, "out", out);
    }
  }
}

// MoE router (MODEL.md §4.22, D10, §3.1 softplus) against router.json.
#include <doctest/doctest.h>

#include "kernels/cpu/moe.h"
#include "base/error.h"
#include "vector_harness.h"

using namespace dsv4;
using namespace dsv4::test;

namespace {

struct RouteRun {
  std::vector<int32_t> sel;
  std::vector<float> wt;
};

RouteRun route_case(const VectorCase& c, const BlockWeights& b, const std::vector<int32_t>& ids) {
  const VectorArray x = c.input("x");
  const int rows = static_cast<int>(x.dim(0)), k = c.param<int>("k");
  RouteRun run{std::vector<int32_t>(rows * k), std::vector<float>(rows * k)};
  CpuWeightCache cache;
  cpu_route(cache, b, x.f32().data(), rows, ids.data(), c.param<int>("hidden"),
            c.param<int>("n_experts"), k, c.param<float>("routed_scaling_factor"), run.sel.data(),
            run.wt.data());
  return run;
}

}  // namespace

TEST_CASE("score routing: top-k of sqrt(softplus)+bias, ties to the lower id, weights from unbiased scores") {
  for (const VectorCase& c : load_cases("router.json", "route_score")) {
    SUBCASE(c.name.c_str()) {
      const std::vector<float> gate = c.input("gate").f32(), bias = c.input("bias").f32();
      BlockWeights b;
      b.layer_id = 3;
      b.gate_weight = f32_view("ffn.gate.weight", c.input("gate").shape, gate);
      b.gate_bias = f32_view("ffn.gate.bias", {c.param<int64_t>("n_experts")}, bias);
      const RouteRun run = route_case(c, b, std::vector<int32_t>(c.input("x").dim(0), 0));
      compare_key(c, "sel", run.sel);
      // f64 expected vs f32 scores and f32 normalization: bound from the vector file.
      compare_key(c, "weights", run.wt);
    }
  }
}

TEST_CASE("hash routing: tid2eid row of the token in stored order, weights from its scores") {
  for (const VectorCase& c : load_cases("router.json", "route_hash")) {
    SUBCASE(c.name.c_str()) {
      const std::vector<float> gate = c.input("gate").f32();
      BlockWeights b;
      b.layer_id = 0;
      b.hash = true;
      b.gate_weight = f32_view("ffn.gate.weight", c.input("gate").shape, gate);
      b.tid2eid = c.input("tid2eid").i32();
      const RouteRun run = route_case(c, b, c.input("ids").i32());
      compare_key(c, "sel", run.sel);
      compare_key(c, "weights", run.wt);
      // A token id outside the table is bad input, named in the message.
      std::vector<int32_t> bad = c.input("ids").i32();
      bad[1] = c.param<int>("vocab");
      CHECK_THROWS_AS(route_case(c, b, bad), Error);
    }
  }
}

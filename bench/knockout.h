// dsv4-bench-decode --knockout (kernels/step_knockout.h): for each kernel of the plain step
// graph, the step re-timed with every node of that kernel disabled. The time a kernel
// saves is what it costs on the step's critical path in the graph, PDL and the concurrent
// lines included; the sum over kernels is not the step (a kernel off the critical path
// saves ~0, and kernels that overlap each other each save less than their time).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace dsv4 {

struct KnockoutRow {
  std::string kernel;
  int nodes = 0;
  double ms = 0;        // the step with the kernel's nodes disabled (median)
  double saved_ms = 0;  // the whole step's median minus ms
};

struct Knockout {
  double step_ms = 0, step_after_ms = 0;  // the whole step before and after the knockouts
  std::vector<KnockoutRow> rows;          // most saved first
};

// refill() puts the stage back at its position (every measurement starts from it), step()
// runs one plain step and waits for it. Per measurement: refill, `warmup` steps with every
// kernel on (the graph replays, or is re-captured after a refill that moved memory), then
// the kernel switched off for `steps` timed steps and back on; the kernels named in `skip`
// are left on. Each kernel is named on stderr before its measurement: with its outputs
// missing a later kernel may fault (then the run ends there, and the name says which one
// to skip). Needs a backend holding the step graph (throws Error otherwise).
Knockout knock_out_kernels(Ops& ops, int warmup, int steps, const std::vector<std::string>& skip,
                           const std::function<void()>& refill, const std::function<void()>& step);

void print_knockout(const Knockout& k, int64_t context);
nlohmann::ordered_json knockout_json(const Knockout& k, int64_t context);

}  // namespace dsv4

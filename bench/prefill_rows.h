// dsv4-bench-decode's prefill mode (issue 13, bench/README.md): time to first token of
// prompts of given lengths through every trunk layer, in chunks of prefill_chunk rows
// (Stage::prefill, then Stage::extend), the head's last row and the argmax on the host.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/checkpoint.h"

namespace dsv4 {

struct PrefillBenchOptions {
  std::vector<int64_t> lens;   // prompt lengths
  int64_t chunk = 2048;        // StageSpec::prefill_chunk
  int runs = 3, warmup = 1;    // timed prefills per length (median) after untimed ones
  int64_t profile_len = 0;     // also an op profile of one prefill this long; 0: none
  double peak_tflops = 790;    // the bf16 tensor-core rate the achieved rate is set against
};

struct PrefillRow {
  int64_t prompt_len = 0, chunk = 0;
  double ttft_ms = 0, ms_min = 0, ms_max = 0;
  double flops = 0;             // bench/prefill_flops.h
  uint64_t peak_mem = 0;        // bytes of (device) memory in use after the timed prefills
  int32_t first_token = -1;     // the argmax after the prompt (equal in every run: checked)
};

// Builds a stage of every trunk layer holding the longest prompt and times each length.
// `free_at_start`: the weight memory's free bytes before any weight was generated (the
// memory this process uses = that minus the free bytes after the runs: every allocation
// of a stage and of the backends' scratch is made once and kept, so this is the peak).
std::vector<PrefillRow> run_prefill_rows(Checkpoint& ckpt, Ops& ops, const PrefillBenchOptions& o,
                                         uint64_t free_at_start);
// The op table (kernels/timed_ops.h) of one prefill of o.profile_len tokens after one
// untimed one.
std::string prefill_profile(Checkpoint& ckpt, Ops& ops, const PrefillBenchOptions& o);

// The printed table and the JSON rows (kind "prefill").
void print_prefill_rows(const std::vector<PrefillRow>& rows, double peak_tflops);
nlohmann::ordered_json prefill_row_json(const PrefillRow& r, int trunk_layers, int runs,
                                        double peak_tflops);

}  // namespace dsv4

// A region for an external profiler started with capture off (`ncu --profile-from-start off`):
// profiler_start() / profiler_stop() are cudaProfilerStart / cudaProfilerStop on a build with
// the CUDA backend and do nothing without it. dsv4-bench-decode --profiler-steps brackets its
// extra plain steps with them, so ncu records one step's kernels and not the weight generation.
#pragma once

namespace dsv4 {

void profiler_start();
void profiler_stop();

}  // namespace dsv4

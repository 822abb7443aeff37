// What the dev benchmarks (bench/dev/*.cu, llm.c dev/cuda style) share: the device's
// multiprocessors, device copies, event timing of a launch (alone or in a graph), the twin tests' closeness
// measure and main's error report.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "base/cuda_check.h"

namespace dsv4::dev {

// The multiprocessors of the current device (the kernels fill the machine).
inline int device_sms() {
  int device = 0, sms = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// Device copies for a bench's problem (cudaFree by the caller).
template <class T>
T* device_alloc(size_t n) {
  T* d = nullptr;
  DSV4_CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(n, 1) * sizeof(T)));  // never null
  return d;
}
template <class T>
T* device_copy(const std::vector<T>& host) {
  T* d = device_alloc<T>(host.size());
  DSV4_CUDA_CHECK(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}
template <class T>
std::vector<T> download(const T* d, size_t n) {
  std::vector<T> host(n);
  DSV4_CUDA_CHECK(cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// Mean microseconds of one launch() on stream s over reps, after one warm-up.
template <class Launch>
float time_launches(Launch launch, int reps, cudaStream_t s) {
  launch();  // warm-up
  cudaEvent_t t0, t1;
  DSV4_CUDA_CHECK(cudaEventCreate(&t0));
  DSV4_CUDA_CHECK(cudaEventCreate(&t1));
  DSV4_CUDA_CHECK(cudaEventRecord(t0, s));
  for (int i = 0; i < reps; ++i) launch();
  DSV4_CUDA_CHECK(cudaEventRecord(t1, s));
  DSV4_CUDA_CHECK(cudaEventSynchronize(t1));
  float ms = 0;
  DSV4_CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
  DSV4_CUDA_CHECK(cudaEventDestroy(t0));
  DSV4_CUDA_CHECK(cudaEventDestroy(t1));
  return ms * 1000.0f / reps;
}

// Mean microseconds of one launch() inside a CUDA graph of `links` of them back to back,
// replayed reps times after one warm-up (the step graph's setting: launch() sets the
// attributes, e.g. cuda::set_pdl before the call).
template <class Launch>
float time_graph(Launch launch, int links, int reps, cudaStream_t s) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  DSV4_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < links; ++i) launch();
  DSV4_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  DSV4_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  DSV4_CUDA_CHECK(cudaGraphDestroy(g));
  const float us = time_launches([&] { DSV4_CUDA_CHECK(cudaGraphLaunch(e, s)); }, reps, s) / links;
  DSV4_CUDA_CHECK(cudaGraphExecDestroy(e));
  return us;
}

// Mean microseconds of one call() over reps, after one warm-up, synchronized around through
// ops (an Ops: what a backend's op sequence costs, launches included).
template <class O, class Call>
double time_op(O& ops, Call call, int reps) {
  call();
  ops.synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) call();
  ops.synchronize();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// Relative L2 and max |err| / max |ref| of got against ref (tests/gpu/twin_harness.h diff).
struct Closeness {
  double rel_l2 = 0, max_norm = 0;
  bool within(double rel_l2_bound, double max_norm_bound) const {
    return rel_l2 <= rel_l2_bound && max_norm <= max_norm_bound;
  }
  bool within(double tolerance) const { return within(tolerance, tolerance); }
};
template <class T, class U>
Closeness closeness(const T* ref, const U* got, size_t n) {
  double num = 0, den = 0, max_abs = 0, ref_max = 0;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::fabs(double(got[i]) - double(ref[i]));
    if (!(e <= max_abs)) max_abs = std::isnan(e) ? INFINITY : e;  // a NaN fails
    num += e * e;
    den += double(ref[i]) * double(ref[i]);
    ref_max = std::max(ref_max, std::fabs(double(ref[i])));
  }
  return {std::sqrt(num / den), max_abs / ref_max};
}
template <class T, class U>
Closeness closeness(const std::vector<T>& ref, const std::vector<U>& got) {
  return closeness(ref.data(), got.data(), ref.size());  // got holds at least ref.size()
}

// A dev bench's main: run(argc, argv)'s status, or 1 with the error named by the bench.
inline int guarded_main(const char* bench, int argc, char** argv, int (*run)(int, char**)) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", bench, e.what());
    return 1;
  }
}

}  // namespace dsv4::dev

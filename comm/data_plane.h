// The data plane (ARCHITECTURE.md "What crosses a boundary"): one payload per operation
// between neighbouring stages, h [T, hc, H] f32 plus optional tap rows [T, n_targets, H].
// Pointers are BACKEND memory (host on cpu, device on cuda). Implementations:
// comm/mpi_transport.cpp (MPI; on GPUs it hands MPI the device pointers when the library
// is CUDA-aware, and otherwise stages them through a pinned host buffer allocated once,
// comm/device_staging.h) and the NCCL transport (comm/cuda/), which implements the same
// interface on device pointers. comm includes no CUDA header.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "comm/mpi_endpoint.h"

namespace dsv4 {

struct BoundaryPayload {
  float* h = nullptr;        // [T, hc, H]
  size_t h_floats = 0;
  float* taps = nullptr;     // [T, n_targets, H]; null when the drafter is off
  size_t tap_floats = 0;
};

class DataPlane {
 public:
  virtual ~DataPlane() = default;
  virtual const char* name() const = 0;  // "mpi", "nccl"
  // Blocking; both sides know the sizes from the operation header. A transport that
  // waits on MPI must throw PeerFailed when another rank fails meanwhile.
  virtual void send(int dst, const BoundaryPayload& p) = 0;
  virtual void recv(int src, const BoundaryPayload& p) = 0;
};

// How backend memory reaches MPI. No copies (direct): MPI reads and writes the payload
// pointers themselves — host memory on the CPU backend, device memory with CUDA-aware MPI,
// where `before_transfer` (the backend's synchronize) runs first so a send reads finished
// rows and a receive overwrites no buffer a kernel still reads. With the copies: payloads
// go through `buffer`, allocated once for the largest payload (pinned host memory).
struct HostStaging {
  std::function<void(float* host, const float* backend, size_t n)> to_host;
  std::function<void(float* backend, const float* host, size_t n)> from_host;
  std::shared_ptr<float> buffer;  // [buffer_floats], with the copies
  size_t buffer_floats = 0;
  std::function<void()> before_transfer;  // direct device pointers
  bool direct() const { return !to_host && !from_host; }
};

std::unique_ptr<DataPlane> make_mpi_transport(MpiEndpoint& ep, HostStaging staging);

}  // namespace dsv4

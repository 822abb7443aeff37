// The MPI data plane: the CPU backend's transport, and on GPUs either device pointers
// straight to a CUDA-aware MPI or copies through one pinned host buffer
// (ARCHITECTURE.md "What crosses a boundary"; comm/data_plane.h HostStaging).
#include "base/error.h"
#include "comm/data_plane.h"

namespace dsv4 {

namespace {
class MpiTransport final : public DataPlane {
 public:
  MpiTransport(MpiEndpoint& ep, HostStaging staging) : ep_(ep), staging_(std::move(staging)) {
    DSV4_CHECK(staging_.direct() || (staging_.to_host && staging_.from_host && staging_.buffer),
               "host staging needs both copy directions and its buffer");
  }
  const char* name() const override { return "mpi"; }

  void send(int dst, const BoundaryPayload& p) override {
    send_part(dst, kTagHidden, p.h, p.h_floats);
    if (p.taps) send_part(dst, kTagTaps, p.taps, p.tap_floats);
  }
  void recv(int src, const BoundaryPayload& p) override {
    recv_part(src, kTagHidden, p.h, p.h_floats);
    if (p.taps) recv_part(src, kTagTaps, p.taps, p.tap_floats);
  }

 private:
  void send_part(int dst, int tag, const float* data, size_t n) {
    if (staging_.direct()) {
      if (staging_.before_transfer) staging_.before_transfer();
      return ep_.send(dst, tag, data, n * sizeof(float));
    }
    staging_.to_host(staged(n), data, n);
    ep_.send(dst, tag, staged(n), n * sizeof(float));
  }
  void recv_part(int src, int tag, float* data, size_t n) {
    if (staging_.direct()) {
      if (staging_.before_transfer) staging_.before_transfer();
      return ep_.recv(src, tag, data, n * sizeof(float));
    }
    ep_.recv(src, tag, staged(n), n * sizeof(float));
    staging_.from_host(data, staged(n), n);
  }
  // The staging buffer, sized at start-up for the run's largest payload.
  float* staged(size_t n) {
    DSV4_CHECK(n <= staging_.buffer_floats, "payload of ", n, " floats exceeds the staging "
               "buffer of ", staging_.buffer_floats);
    return staging_.buffer.get();
  }

  MpiEndpoint& ep_;
  HostStaging staging_;
};
}  // namespace

std::unique_ptr<DataPlane> make_mpi_transport(MpiEndpoint& ep, HostStaging staging) {
  return std::make_unique<MpiTransport>(ep, std::move(staging));
}

}  // namespace dsv4

// The MPI data plane: the CPU backend's transport, and the GPU fallback that stages
// device memory through host buffers (ARCHITECTURE.md "What crosses a boundary").
#include <vector>

#include "comm/data_plane.h"
#include "base/error.h"

namespace dsv4 {

namespace {
class MpiTransport final : public DataPlane {
 public:
  MpiTransport(MpiEndpoint& ep, HostStaging staging) : ep_(ep), staging_(std::move(staging)) {
    DSV4_CHECK(staging_.direct() || (staging_.to_host && staging_.from_host),
               "host staging needs both copy directions");
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
    if (staging_.direct()) return ep_.send(dst, tag, data, n * sizeof(float));
    host_.resize(n);
    staging_.to_host(host_.data(), data, n);
    ep_.send(dst, tag, host_.data(), n * sizeof(float));
  }
  void recv_part(int src, int tag, float* data, size_t n) {
    if (staging_.direct()) return ep_.recv(src, tag, data, n * sizeof(float));
    host_.resize(n);
    ep_.recv(src, tag, host_.data(), n * sizeof(float));
    staging_.from_host(data, host_.data(), n);
  }

  MpiEndpoint& ep_;
  HostStaging staging_;
  std::vector<float> host_;  // staging buffer (device backends)
};
}  // namespace

std::unique_ptr<DataPlane> make_mpi_transport(MpiEndpoint& ep, HostStaging staging) {
  return std::make_unique<MpiTransport>(ep, std::move(staging));
}

}  // namespace dsv4

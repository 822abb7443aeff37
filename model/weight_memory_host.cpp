// Host weight memory: generated tensors in owned host buffers; views of any host memory
// (mapped files too) read with memcpy and checked element by element.
#include <cmath>
#include <cstring>
#include <vector>

#include "model/synthetic_host.h"
#include "model/weight_memory.h"

namespace dsv4 {

FaultAt first_fault_host(DType dtype, const uint8_t* p, size_t n, bool block_scale) {
  switch (dtype) {
    case DType::F32:
      for (size_t i = 0; i < n; i += 4) {
        float x;
        std::memcpy(&x, p + i, 4);
        if (!std::isfinite(x)) return {ValueFault::non_finite, static_cast<int64_t>(i / 4)};
      }
      break;
    case DType::BF16:
      for (size_t i = 0; i < n; i += 2) {
        uint16_t b;
        std::memcpy(&b, p + i, 2);
        if ((b & 0x7F80u) == 0x7F80u) return {ValueFault::non_finite, static_cast<int64_t>(i / 2)};
      }
      break;
    case DType::F8_E8M0:
      for (size_t i = 0; i < n; ++i) {
        if (p[i] == 0xFF) return {ValueFault::e8m0_nan, static_cast<int64_t>(i)};
        if (p[i] == 0x00) return {ValueFault::e8m0_zero, static_cast<int64_t>(i)};
      }
      break;
    case DType::F8_E4M3:
      for (size_t i = 0; i < n; ++i) {
        if ((p[i] & 0x7F) == 0x7F) return {ValueFault::e4m3_nan, static_cast<int64_t>(i)};
        if (block_scale && (p[i] & 0x80)) return {ValueFault::block_scale_sign, static_cast<int64_t>(i)};
      }
      break;
    default:
      break;  // packed FP4 bytes: every code is a value; integer tables are checked by use
  }
  return {};
}

namespace {

class HostWeightMemory final : public WeightMemory {
 public:
  std::string name() const override { return "host memory"; }
  bool device() const override { return false; }
  TensorView generate(const SynthTensor& t) override {
    blocks_.push_back(synth_generate_host(t));
    bytes_ += t.bytes();
    TensorView v;
    v.name = t.name;
    v.dtype = t.dtype;
    v.shape = t.shape;
    v.data = blocks_.back().data();
    v.nbytes = blocks_.back().size();
    v.storage = next_storage_id();
    return v;
  }
  void read(const TensorView& v, size_t offset, size_t n, void* host) const override {
    std::memcpy(host, v.data + offset, n);
  }
  FaultAt first_fault(const TensorView& v, bool block_scale) const override {
    return first_fault_host(v.dtype, v.data, v.nbytes, block_scale);
  }
  uint64_t bytes() const override { return bytes_; }

 private:
  std::vector<std::vector<uint8_t>> blocks_;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<WeightMemory> make_host_weight_memory() { return std::make_unique<HostWeightMemory>(); }

}  // namespace dsv4

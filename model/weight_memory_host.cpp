// Host weight memory: generated tensors in owned host buffers; views of any host memory
// (mapped files too) read with memcpy and checked element by element.
#include <unistd.h>

#include <cstring>
#include <vector>

#include "model/synthetic_host.h"
#include "model/weight_memory.h"

namespace dsv4 {

FaultAt first_fault_host(DType dtype, const uint8_t* p, size_t n, bool block_scale) {
  if (!has_value_checks(dtype)) return {};
  const size_t width = dtype_size(dtype);
  for (size_t i = 0; i < n; i += width) {
    const ValueFault f = value_fault(dtype, p + i, block_scale);
    if (f != ValueFault::none) return {f, static_cast<int64_t>(i / width)};
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
  uint64_t free_bytes() const override {
    return static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }

 private:
  std::vector<std::vector<uint8_t>> blocks_;
  uint64_t bytes_ = 0;
};

}  // namespace

std::unique_ptr<WeightMemory> make_host_weight_memory() { return std::make_unique<HostWeightMemory>(); }

}  // namespace dsv4

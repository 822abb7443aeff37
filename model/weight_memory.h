// Where a weight source's stored bytes live once resident: host memory (a mapped file,
// or tensors generated on the host) or a backend's device memory (tensors generated in
// place, issue 11). The loader's checks read through this interface, so everything after
// "the stored bytes are resident" is one code path for every source.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/synthetic_plan.h"
#include "model/tensor_view.h"
#include "model/value_checks.h"

namespace dsv4 {

// The first element of a stored tensor that a load-time value check refuses.
struct FaultAt {
  ValueFault fault = ValueFault::none;
  int64_t element = -1;
};
// The checks of model/value_checks.h over host bytes, element by element.
FaultAt first_fault_host(DType dtype, const uint8_t* bytes, size_t nbytes, bool block_scale);

class WeightMemory {
 public:
  virtual ~WeightMemory() = default;
  virtual std::string name() const = 0;   // "host memory", "cuda device 0"
  virtual bool device() const = 0;
  // Allocates t.bytes() bytes that live as long as this object and fills them with the
  // recipe's stored bytes; the returned view has storage set and on_device = device().
  virtual TensorView generate(const SynthTensor& t) = 0;
  // Copies bytes [offset, offset + n) of a view in this memory to host (small tables:
  // tid2eid, scale_2, an element a check refused).
  virtual void read(const TensorView& v, size_t offset, size_t n, void* host) const = 0;
  // The load-time value check of a view in this memory.
  virtual FaultAt first_fault(const TensorView& v, bool block_scale) const = 0;
  virtual uint64_t bytes() const = 0;     // generated so far
  virtual uint64_t free_bytes() const = 0;  // what is left for more (device or host memory)
};

std::unique_ptr<WeightMemory> make_host_weight_memory();

}  // namespace dsv4

// dtype table and TensorView element access (CHECKPOINT.md §1.4, §3.1).
#include "model/tensor_view.h"

#include <atomic>
#include <cstring>
#include <iterator>

#include "model/codecs.h"
#include "base/error.h"

namespace dsv4 {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

// The dtypes this engine accepts, with their safetensors names and element bytes, in
// DType enum order (info() indexes by the enum value).
constexpr DTypeInfo kDTypes[] = {
    {DType::BF16, "BF16", 2},       {DType::F32, "F32", 4}, {DType::F8_E4M3, "F8_E4M3", 1},
    {DType::F8_E8M0, "F8_E8M0", 1}, {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
    {DType::I64, "I64", 8},         {DType::I32, "I32", 4},
};

std::atomic<uint64_t> g_storage_ids{0};

const DTypeInfo& info(DType d) {
  const auto i = static_cast<size_t>(d);
  DSV4_CHECK(i < std::size(kDTypes) && kDTypes[i].dtype == d, "DType ", i);
  return kDTypes[i];
}

}  // namespace

const char* dtype_name(DType d) { return info(d).name; }

size_t dtype_size(DType d) { return info(d).size; }

bool dtype_from_name(const std::string& s, DType* out) {
  for (const DTypeInfo& i : kDTypes) {
    if (s == i.name) {
      *out = i.dtype;
      return true;
    }
  }
  return false;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

float TensorView::f32_at(int64_t i) const {
  DSV4_CHECK(i >= 0 && i < numel(), "tensor ", name, " index ", i, " of ", numel());
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, data + 4 * i, sizeof v);
    return v;
  }
  if (dtype == DType::BF16) {
    uint16_t b;
    std::memcpy(&b, data + 2 * i, sizeof b);
    return bf16_to_f32(b);
  }
  throw Error(cat("tensor ", name, ": dtype ", dtype_name(dtype),
                  " read as f32 (only BF16 and F32 are f32 islands)"));
}

uint64_t next_storage_id() { return ++g_storage_ids; }

}  // namespace dsv4

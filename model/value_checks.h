// The load-time value checks of one stored element (CHECKPOINT.md §4: R7, R21, A4, A5),
// compiled for host and device, so a tensor is checked the same way wherever it lives.
#pragma once
#include <cstdint>

#include "base/scalar_formats.h"
#include "model/tensor_view.h"

namespace dsv4 {

enum class ValueFault : uint8_t {
  none, non_finite, e8m0_nan, e8m0_zero, e4m3_nan, block_scale_sign
};

// Element `e` (dtype_size(dtype) bytes, little-endian) of a stored tensor; block_scale:
// an NVFP4 weight_scale, whose sign bit is refused. Packed FP4 bytes and integer tables
// always pass (every code is a value; tables are checked by use).
DSV4_HD ValueFault value_fault(DType dtype, const uint8_t* e, bool block_scale) {
  switch (dtype) {
    case DType::F32: {
      const uint32_t b = static_cast<uint32_t>(e[0]) | static_cast<uint32_t>(e[1]) << 8 |
                         static_cast<uint32_t>(e[2]) << 16 | static_cast<uint32_t>(e[3]) << 24;
      return (b & 0x7F800000u) == 0x7F800000u ? ValueFault::non_finite : ValueFault::none;
    }
    case DType::BF16:
      return (e[1] & 0x7F) == 0x7F && (e[0] & 0x80) ? ValueFault::non_finite : ValueFault::none;
    case DType::F8_E8M0:
      return e[0] == 0xFF ? ValueFault::e8m0_nan : e[0] == 0x00 ? ValueFault::e8m0_zero : ValueFault::none;
    case DType::F8_E4M3:
      if ((e[0] & 0x7F) == 0x7F) return ValueFault::e4m3_nan;
      return block_scale && (e[0] & 0x80) ? ValueFault::block_scale_sign : ValueFault::none;
    default:
      return ValueFault::none;
  }
}

// Whether the dtype has value checks at all (the others are skipped without a pass).
DSV4_HD bool has_value_checks(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F8_E8M0 ||
         dtype == DType::F8_E4M3;
}

}  // namespace dsv4

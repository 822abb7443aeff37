#include "launcher/build_info.h"

#include "base/error.h"
#include "kernels/ops.h"

namespace dsv4 {

std::string version_text() {
  return cat("dsv4-stage ", build_revision(), " (CUDA backend: ",
             cuda_backend_built() ? "built" : "not built", ")");
}

}  // namespace dsv4

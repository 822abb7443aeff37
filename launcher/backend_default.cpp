#include "launcher/backend_default.h"

#include "base/error.h"

namespace dsv4 {

BackendDefault default_backend(bool cuda_built, int devices_visible) {
  if (!cuda_built) return {Backend::cpu, "backend cpu (default: this build has no CUDA backend)"};
  if (devices_visible <= 0)
    return {Backend::cpu, "backend cpu (default: this build has CUDA but no CUDA device is "
                          "visible; check the driver and CUDA_VISIBLE_DEVICES)"};
  return {Backend::cuda, cat("backend cuda (default: this build has CUDA and ", devices_visible,
                             " device(s) are visible; backend: cpu for the CPU reference)")};
}

}  // namespace dsv4

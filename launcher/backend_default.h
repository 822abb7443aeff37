// The backend of a run that names none (configs/README.md `backend`): cuda when this
// build has the CUDA backend and a CUDA device is visible, cpu otherwise. The reason goes
// to every rank's log, so a run that fell back to the CPU says why.
#pragma once
#include <string>

#include "launcher/run_config.h"

namespace dsv4 {

struct BackendDefault {
  Backend backend = Backend::cpu;
  std::string reason;  // "backend cuda (default: ...)" / "backend cpu (default: ...)"
};

BackendDefault default_backend(bool cuda_built, int devices_visible);

}  // namespace dsv4

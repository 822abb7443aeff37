#include "kernels/cpu/parallel_rows.h"

#include <cstdlib>
#include <string>

#include "base/error.h"

namespace dsv4 {

int cpu_threads() {
  if (const char* env = std::getenv("DSV4_CPU_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1)
      throw Error(cat("DSV4_CPU_THREADS='", env, "' must be an integer >= 1"));
    return static_cast<int>(std::min<long>(v, kMaxCpuThreads));
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp<unsigned>(hw, 1, kMaxCpuThreads));
}

}  // namespace dsv4

// Runs a CPU op with DSV4_CPU_THREADS forced (kernels/cpu/parallel_rows.h), restoring the
// caller's setting after, so a test can compare the threaded op with the serial one.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace dsv4::test {

template <class F>
auto with_cpu_threads(int threads, const F& fn) {
  const char* prior = std::getenv("DSV4_CPU_THREADS");
  const std::optional<std::string> saved = prior ? std::optional<std::string>(prior) : std::nullopt;
  setenv("DSV4_CPU_THREADS", std::to_string(threads).c_str(), 1);
  struct Restore {
    const std::optional<std::string>& saved;
    ~Restore() {
      if (saved) setenv("DSV4_CPU_THREADS", saved->c_str(), 1);
      else unsetenv("DSV4_CPU_THREADS");
    }
  } restore{saved};
  return fn();
}

}  // namespace dsv4::test

// The name of the host this process runs on, for error messages and logs that must say
// where something happened (a job spans several machines).
#pragma once
#include <unistd.h>

#include <string>

namespace dsv4 {

inline std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

}  // namespace dsv4

// The benchmarks' --json output: written to PATH.partial, then renamed, so a killed run
// leaves no half-written PATH.
#pragma once
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"

namespace dsv4 {

inline void write_json_file(const std::string& path, const nlohmann::ordered_json& j) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << j.dump(2) << "\n";
    if (!f.good()) throw Error(cat("--json ", path, ": cannot write"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error(cat("--json ", path, ": cannot rename ", tmp));
}

}  // namespace dsv4

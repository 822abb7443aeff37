// The benchmarks' comma-separated integer flags (--contexts 128,4096, --rows 1,4, ...).
#pragma once
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/error.h"

namespace dsv4 {

// The integers of `text` ("1,2,3"), each >= min_value; an Error names the flag and item.
inline std::vector<int64_t> int_list(const std::string& text, const char* flag, int64_t min_value) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size() || out.back() < min_value) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error(cat(flag, ": '", item, "' is not an integer >= ", min_value, " (expected e.g. 1,2,3)"));
    }
  }
  if (out.empty()) throw Error(cat(flag, ": empty list"));
  return out;
}

}  // namespace dsv4

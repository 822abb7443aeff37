#include "model/json_file.h"

#include <fstream>

#include "model/error.h"

namespace dsv4 {

nlohmann::ordered_json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream f(path);
  if (!f) throw Error(cat(what, " ", path, ": cannot open"));
  try {
    return nlohmann::ordered_json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(what, " ", path, ": not JSON (", e.what(), ")"));
  }
}

}  // namespace dsv4

// Reads a whole JSON file for the engine's small JSON inputs (replay files, verify cost
// tables, dump run settings), refusing by name: `what path: cannot open` or `not JSON`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dsv4 {

// Object keys keep their file order (ordered_json).
nlohmann::ordered_json read_json_file(const std::string& path, const std::string& what);

}  // namespace dsv4

// JSON input the way the loaders want it (ARCHITECTURE.md law 6): nlohmann::json keeps
// only the last of two equal keys in an object, so a repeated key would silently
// override the first; this parser refuses it, naming the source, the key and the object
// that holds it. Used for config.json, the shard index and safetensors headers.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace dsv4 {

// Parses [begin, end); throws Error "<source>: not valid JSON: ..." or
// "<source>: duplicate key '<k>' in <object>" (<object> is "the top-level object" or the
// dotted path of keys leading to it, e.g. "rope_scaling"); `top_level_noun` replaces
// "key" for the top level's keys (a safetensors header's are tensor names).
nlohmann::json parse_json_strict(const char* begin, const char* end, const std::string& source,
                                 const char* top_level_noun = "key");
nlohmann::json parse_json_strict(const std::string& text, const std::string& source);

// Reads a whole file (Error "<path>: cannot open ..." / "read failed") and parses it.
nlohmann::json load_json_strict(const std::string& path);
// The same, its Error prefixed by `what` ("replay file <path>: cannot open").
nlohmann::json load_json_strict(const std::string& path, const std::string& what);

}  // namespace dsv4

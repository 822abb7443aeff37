#include "model/json_strict.h"

#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "base/error.h"

namespace dsv4 {

namespace {
// One open object: the keys seen so far and the key under which it hangs.
struct OpenObject {
  std::string name;
  std::set<std::string> keys;
};

std::string object_path(const std::vector<OpenObject>& open) {
  std::string path;
  for (size_t i = 1; i < open.size(); ++i) path += (path.empty() ? "" : ".") + open[i].name;
  return path.empty() ? "the top-level object" : path;
}
}  // namespace

nlohmann::json parse_json_strict(const char* begin, const char* end, const std::string& source,
                                 const char* top_level_noun) {
  std::vector<OpenObject> open;
  std::string last_key;
  auto on_event = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (event == E::object_start) {
      open.push_back({last_key, {}});
    } else if (event == E::object_end && !open.empty()) {
      open.pop_back();
    } else if (event == E::key && !open.empty()) {
      last_key = parsed.get<std::string>();
      if (!open.back().keys.insert(last_key).second)
        throw Error(cat(source, ": duplicate ", open.size() == 1 ? top_level_noun : "key", " '",
                        last_key, "' in ", object_path(open)));
    }
    return true;
  };
  try {
    return nlohmann::json::parse(begin, end, on_event);
  } catch (const nlohmann::json::exception& e) {
    throw Error(cat(source, ": not valid JSON: ", e.what()));
  }
}

nlohmann::json parse_json_strict(const std::string& text, const std::string& source) {
  return parse_json_strict(text.data(), text.data() + text.size(), source);
}

nlohmann::json load_json_strict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(cat(path, ": read failed"));
  return parse_json_strict(text.str(), path);
}

nlohmann::json load_json_strict(const std::string& path, const std::string& what) {
  try {
    return load_json_strict(path);
  } catch (const Error& e) {
    throw Error(cat(what, " ", e.what()));
  }
}

}  // namespace dsv4

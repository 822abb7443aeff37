// kernel_base_name (kernels/step_knockout.h): host logic, shared by the backends.
#include "kernels/step_knockout.h"

#include <cctype>
#include <string>
#include <vector>

namespace dsv4 {

std::string kernel_base_name(const std::string& demangled) {
  std::string name = demangled;
  for (const std::string& anon : {std::string("(anonymous namespace)::"), std::string("<unnamed>::")})
    for (size_t at; (at = name.find(anon)) != std::string::npos;) name.erase(at, anon.size());
  std::string out;
  int depth = 0;
  for (const char ch : name) {  // up to the parameter list; the return type cut at depth 0
    if (ch == '(' && depth == 0) break;
    if (ch == '<') ++depth;
    if (ch == '>') --depth;
    if (depth == 0 && ch == ' ') {
      out.clear();  // a return type ("void") before the name
    } else if (ch != ' ') {
      out += ch;
    }
  }
  // Every namespace, the name's and those inside the template arguments ('dsv4::cuda::TcFp8Run'
  // -> 'TcFp8Run', as ncu prints them).
  std::string bare;
  size_t word = 0;  // where the current identifier starts in bare
  for (size_t i = 0; i < out.size(); ++i) {
    if (out.compare(i, 2, "::") == 0) {
      bare.erase(word);
      ++i;
      continue;
    }
    const char ch = out[i];
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_')) word = bare.size() + 1;
    bare += ch;
  }
  return bare;
}

std::vector<std::string> split_kernel_names(const std::string& list) {
  std::vector<std::string> names(1);
  int depth = 0;
  for (const char ch : list) {
    if (ch == '<' || ch == '(') ++depth;
    if (ch == '>' || ch == ')') --depth;
    if (ch == ',' && depth == 0) {
      names.emplace_back();
    } else {
      names.back() += ch;
    }
  }
  std::erase_if(names, [](const std::string& n) { return n.empty(); });
  return names;
}

}  // namespace dsv4

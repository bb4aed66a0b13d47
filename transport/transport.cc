#include "transport/transport.h"

#include <algorithm>

namespace kolo {

bool TransportEnv::allows(int r, const char* name) const {
  const std::vector<std::string>& names = allowed[r];
  return std::find(names.begin(), names.end(), name) != names.end();
}

const TransportRow* find_transport(const std::string& name) {
  for (const TransportRow& row : transport_table()) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

Result<std::vector<std::string>> parse_transports(const std::string& text) {
  std::vector<std::string> names;
  if (text.empty()) {
    for (const TransportRow& row : transport_table()) names.push_back(row.name);
    return names;
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    if (find_transport(name) == nullptr) {
      std::string known;
      for (const TransportRow& row : transport_table()) known += (known.empty() ? "" : ", ") + std::string(row.name);
      return error(Code::kInvalidArgument, "KOLO_TRANSPORTS='", text, "': '", name, "' is not a transport of kolo (",
                   known, ")", name == "ucx" ? "; this kolo was built without UCX (libucx-dev)" : "");
    }
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    start = end + 1;
  }
  return names;
}

const TransportRow* choose_transport(const TransportEnv& env, int a, int b) {
  for (const std::string& name : env.allowed[std::min(a, b)]) {
    const TransportRow* row = find_transport(name);
    if (row != nullptr && env.allows(a, row->name) && env.allows(b, row->name) && row->reachable(env, a, b)) {
      return row;
    }
  }
  return nullptr;
}

}  // namespace kolo

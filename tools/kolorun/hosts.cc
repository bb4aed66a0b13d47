#include "tools/kolorun/hosts.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <fstream>
#include <map>
#include <sstream>

namespace kolo::kolorun {
namespace {

std::string trim(const std::string& text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// Host names end up as an ssh argument: a leading '-' would be read as an option, and
// anything outside this set has no business in a host name or address.
Status check_host_name(const std::string& name) {
  if (name.empty()) return error(Code::kInvalidArgument, "empty host name");
  if (name[0] == '-') return error(Code::kInvalidArgument, "host name '", name, "' starts with '-'");
  for (char c : name) {
    bool fine = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
                c == ':' || c == '@' || c == '%';
    if (!fine) return error(Code::kInvalidArgument, "host name '", name, "' has the character '", c, "'");
  }
  return Status::ok_status();
}

Result<int> parse_slots(const std::string& text) {
  if (text.empty() || text.size() > 9) return error(Code::kInvalidArgument, "bad slot count '", text, "'");
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return error(Code::kInvalidArgument, "bad slot count '", text, "'");
    }
  }
  long value = std::stol(text);
  if (value < 1 || value > kMaxSlotsPerHost) {
    return error(Code::kInvalidArgument, "slot count ", value, " is not in 1..", kMaxSlotsPerHost);
  }
  return static_cast<int>(value);
}

// Adds a host, merging with an earlier mention of the same name.
void add_host(std::vector<HostSlots>& hosts, const std::string& name, int slots) {
  for (HostSlots& host : hosts) {
    if (host.name == name) {
      host.slots = static_cast<int>(std::min<long>(static_cast<long>(host.slots) + slots, kMaxSlotsPerHost));
      return;
    }
  }
  hosts.push_back({name, slots, ""});
}

// One "-H" entry: "host", "host:N", "[v6addr]" or "[v6addr]:N".
Status parse_host_entry(const std::string& entry, std::vector<HostSlots>& hosts) {
  std::string name = entry;
  std::string slots_text;
  if (!entry.empty() && entry[0] == '[') {
    size_t close = entry.find(']');
    if (close == std::string::npos) return error(Code::kInvalidArgument, "'", entry, "' lacks ']'");
    name = entry.substr(1, close - 1);
    std::string rest = entry.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return error(Code::kInvalidArgument, "'", entry, "': expected ':N' after ']'");
      slots_text = rest.substr(1);
      if (slots_text.empty()) return error(Code::kInvalidArgument, "'", entry, "': missing slot count after ':'");
    }
  } else {
    size_t colon = entry.rfind(':');
    // More than one colon without brackets is an IPv6 address with no slot count.
    if (colon != std::string::npos && entry.find(':') == colon) {
      name = entry.substr(0, colon);
      slots_text = entry.substr(colon + 1);
      if (slots_text.empty()) return error(Code::kInvalidArgument, "'", entry, "': missing slot count after ':'");
    }
  }
  int slots = 1;
  if (!slots_text.empty()) {
    Result<int> parsed = parse_slots(slots_text);
    if (!parsed.ok()) return parsed.status().with_context(str_cat("'", entry, "': "));
    slots = parsed.value();
  }
  Status name_ok = check_host_name(name);
  if (!name_ok.ok()) return name_ok.with_context(str_cat("'", entry, "': "));
  add_host(hosts, name, slots);
  return Status::ok_status();
}

std::string short_name(const std::string& name) { return name.substr(0, name.find('.')); }

}  // namespace

Result<std::vector<HostSlots>> parse_host_list(const std::string& text) {
  std::vector<HostSlots> hosts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string entry = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (entry.empty()) return error(Code::kInvalidArgument, "empty entry in host list '", text, "'");
    KOLO_TRY(parse_host_entry(entry, hosts));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

Result<std::vector<HostSlots>> parse_hostfile(const std::string& text, const std::string& origin) {
  std::vector<HostSlots> hosts;
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    std::string where = str_cat(origin, ":", line_number, ": ");
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string name;
    if (!(fields >> name)) continue;  // blank or comment-only line
    Status name_ok = check_host_name(name);
    if (!name_ok.ok()) return name_ok.with_context(where);
    int slots = 1;
    bool have_slots = false;
    std::string field;
    while (fields >> field) {
      size_t eq = field.find('=');
      std::string key = field.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
      if (eq == std::string::npos || (key != "slots" && key != "max_slots")) {
        return error(Code::kInvalidArgument, where, "unknown field '", field, "' (expected slots=N)");
      }
      Result<int> parsed = parse_slots(value);
      if (!parsed.ok()) return parsed.status().with_context(str_cat(where, key, ": "));
      // max_slots is accepted for Open MPI host files; kolorun never oversubscribes, so
      // it only matters as a cap on slots.
      if (key == "slots") {
        if (have_slots) return error(Code::kInvalidArgument, where, "slots given twice");
        slots = parsed.value();
        have_slots = true;
      } else if (have_slots && slots > parsed.value()) {
        return error(Code::kInvalidArgument, where, "slots=", slots, " exceeds max_slots=", parsed.value());
      }
    }
    // A host twice is a mistake in a file (a copy-paste, two names for one slot count), not
    // a wish for the sum: say where.
    for (const HostSlots& seen : hosts) {
      if (seen.name == name) return error(Code::kInvalidArgument, where, "host '", name, "' again (first at ", seen.origin, ")");
    }
    hosts.push_back({name, slots, str_cat(origin, ":", line_number)});
  }
  if (hosts.empty()) return error(Code::kInvalidArgument, origin, ": no hosts in the file");
  return hosts;
}

Result<std::vector<HostSlots>> read_hostfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return error(Code::kInvalidArgument, "cannot open host file '", path, "'");
  std::ostringstream text;
  text << file.rdbuf();
  // A host file is a few lines; a huge one is a mistake (wrong file), not a cluster.
  if (text.str().size() > (16u << 20)) return error(Code::kInvalidArgument, path, ": host file is too large");
  return parse_hostfile(text.str(), path);
}

Status check_hosts_resolve(const std::vector<HostSlots>& hosts, const std::string& this_host) {
  for (const HostSlots& host : hosts) {
    if (is_local_host(host.name, this_host)) continue;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.name.c_str(), nullptr, &hints, &found);
    if (found != nullptr) ::freeaddrinfo(found);
    if (rc != 0) {
      return error(Code::kInvalidArgument, host.origin.empty() ? "" : host.origin + ": ", "host '", host.name,
                   "' is unknown (", ::gai_strerror(rc), "); for ssh's own aliases give --ssh ssh");
    }
  }
  return Status::ok_status();
}

bool is_local_host(const std::string& host, const std::string& this_host) {
  if (host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  if (this_host.empty()) return false;
  if (host == this_host) return true;
  // "node7" and "node7.cluster" name the same machine when one of them is unqualified.
  bool host_short = host.find('.') == std::string::npos;
  bool this_short = this_host.find('.') == std::string::npos;
  if (host_short != this_short) return short_name(host) == short_name(this_host);
  return false;
}

std::string this_hostname() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  long total = 0;
  for (const HostSlots& host : hosts) {
    total += host.slots;
    if (total > kMaxRanks) return kMaxRanks + 1;
  }
  return static_cast<int>(total);
}

Result<std::vector<Placement>> place_ranks(const std::vector<HostSlots>& hosts, int np,
                                           const std::string& this_host) {
  if (np < 1 || np > kMaxRanks) {
    return error(Code::kInvalidArgument, "number of ranks ", np, " is not in 1..", kMaxRanks);
  }
  std::vector<Placement> placements;
  placements.reserve(np);
  if (hosts.empty()) {
    for (int rank = 0; rank < np; ++rank) placements.push_back({rank, "localhost", true, rank, np});
    return placements;
  }
  int available = total_slots(hosts);
  if (np > available) {
    return error(Code::kInvalidArgument, np, " ranks asked for, but the hosts have only ", available, " slots");
  }
  // All local aliases are one machine; every other name is its own machine.
  auto machine_of = [&](const std::string& name) { return is_local_host(name, this_host) ? std::string() : name; };
  std::map<std::string, int> count_on_machine;
  size_t host_index = 0;
  int used_on_host = 0;
  for (int rank = 0; rank < np; ++rank) {
    while (used_on_host == hosts[host_index].slots) {
      ++host_index;
      used_on_host = 0;
    }
    const std::string& name = hosts[host_index].name;
    Placement placement;
    placement.rank = rank;
    placement.host = name;
    placement.local = is_local_host(name, this_host);
    placement.local_rank = count_on_machine[machine_of(name)]++;
    placements.push_back(placement);
    ++used_on_host;
  }
  for (Placement& placement : placements) placement.local_size = count_on_machine[machine_of(placement.host)];
  return placements;
}

namespace {
const char kHostPlaceholder[] = "{host}";

std::vector<std::string> blank_separated(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}
}  // namespace

std::vector<std::string> launcher_words(const std::string& launcher, const std::string& host) {
  const std::string kHost = kHostPlaceholder;
  std::vector<std::string> words = blank_separated(launcher);
  for (std::string& word : words) {
    for (size_t at = word.find(kHost); at != std::string::npos; at = word.find(kHost, at + host.size())) {
      word.replace(at, kHost.size(), host);
    }
  }
  return words;
}

std::string launcher_template_problem(const std::string& launcher) {
  std::vector<std::string> words = blank_separated(launcher);
  if (words.empty()) return "the template is empty";
  if (launcher.find(kHostPlaceholder) == std::string::npos) {
    return "it has no {host}, so every host would get the same command";
  }
  if (words[0].find(kHostPlaceholder) != std::string::npos) return "its first word must be a program, without {host}";
  return "";
}

}  // namespace kolo::kolorun

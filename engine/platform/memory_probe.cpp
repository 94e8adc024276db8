#include "engine/platform/memory_probe.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>

namespace spillway::engine {

namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<int64_t> parse_int(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<int64_t> read_int_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::nullopt;
  return parse_int(*text);
}

// Value of `key` in a "key value\n" file (memory.stat) or "Key:   value kB" (meminfo).
std::optional<int64_t> find_field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::string_view rest(line);
    rest.remove_prefix(key.size());
    if (rest.empty() || !(rest[0] == ' ' || rest[0] == ':' || rest[0] == '\t')) continue;
    rest.remove_prefix(1);
    while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
    const size_t end = rest.find_first_of(" \t");
    auto v = parse_int(rest.substr(0, end));
    if (!v) return std::nullopt;
    if (rest.find("kB") != std::string_view::npos) *v *= 1024;
    return v;
  }
  return std::nullopt;
}

}  // namespace

LinuxMemorySource::LinuxMemorySource(std::string proc_root, std::string cgroup_root)
    : proc_root_(std::move(proc_root)) {
  // /proc/self/cgroup: "ID:controllers:path". v1 has a line whose controllers include
  // "memory"; v2 has the single line "0::path".
  std::string v1_path, v2_path;
  bool has_v2_line = false;
  if (auto text = read_file(proc_root_ + "/self/cgroup")) {
    std::istringstream in(*text);
    std::string line;
    while (std::getline(in, line)) {
      const size_t a = line.find(':'), b = line.find(':', a + 1);
      if (a == std::string::npos || b == std::string::npos) continue;
      const std::string controllers = line.substr(a + 1, b - a - 1);
      const std::string path = line.substr(b + 1);
      std::istringstream cs(controllers);
      std::string c;
      while (std::getline(cs, c, ',')) {
        if (c == "memory") v1_path = path;
      }
      if (line.compare(0, 3, "0::") == 0) {
        v2_path = path;
        has_v2_line = true;
      }
    }
  }
  std::error_code ec;
  auto first_existing = [&](std::initializer_list<std::string> dirs, const char* file) {
    for (const std::string& d : dirs) {
      if (fs::exists(d + "/" + file, ec)) return d;
    }
    return std::string();
  };
  if (!v1_path.empty()) {
    // Inside a container the hierarchy is often mounted at its own cgroup: fall back to
    // the mount root when the path from /proc does not exist.
    cgroup_dir_ = first_existing({cgroup_root + "/memory" + v1_path, cgroup_root + "/memory"},
                                 "memory.limit_in_bytes");
  }
  if (cgroup_dir_.empty() && has_v2_line) {
    cgroup_dir_ = first_existing({cgroup_root + v2_path, cgroup_root}, "memory.max");
    v2_ = !cgroup_dir_.empty();
  }
}

namespace {

// Anonymous + shmem + unevictable + kernel memory charged to the cgroup (see the header),
// nullopt when memory.stat has no anonymous count.
std::optional<int64_t> unreclaimable_bytes(const std::string& dir, const std::string& stat, bool v2) {
  auto field = [&](std::string_view key) { return find_field(stat, key).value_or(0); };
  if (v2) {
    const auto anon = find_field(stat, "anon");
    if (!anon) return std::nullopt;
    int64_t kernel = 0;
    if (auto k = find_field(stat, "kernel")) {
      kernel = *k;  // Linux 5.18+
    } else {
      for (const char* part : {"slab", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc"}) {
        kernel += field(part);
      }
    }
    return *anon + field("shmem") + field("unevictable") + kernel;
  }
  // v1: the total_* fields include descendant cgroups; a cgroup with no children has only
  // the plain ones on some kernels.
  auto total = [&](std::string_view key) -> std::optional<int64_t> {
    if (auto v = find_field(stat, "total_" + std::string(key))) return v;
    return find_field(stat, key);
  };
  const auto rss = total("rss");
  if (!rss) return std::nullopt;
  // rss includes transparent huge pages (rss_huge is a part of it, not an addition).
  const int64_t anon = std::max(*rss, total("rss_huge").value_or(0));
  const int64_t kmem = read_int_file(dir + "/memory.kmem.usage_in_bytes").value_or(0);
  return anon + total("shmem").value_or(0) + total("unevictable").value_or(0) + std::max<int64_t>(kmem, 0);
}

}  // namespace

MemoryReading LinuxMemorySource::read() const {
  MemoryReading r;
  const auto meminfo = read_file(proc_root_ + "/meminfo").value_or("");
  const int64_t total = find_field(meminfo, "MemTotal").value_or(0);
  const int64_t mem_available = find_field(meminfo, "MemAvailable").value_or(total);

  std::optional<int64_t> limit, usage, inactive_file, unreclaimable;
  if (!cgroup_dir_.empty()) {
    const std::string stat = read_file(cgroup_dir_ + "/memory.stat").value_or("");
    if (v2_) {
      // "max" (unlimited) does not parse: no limit.
      limit = read_int_file(cgroup_dir_ + "/memory.max");
      usage = read_int_file(cgroup_dir_ + "/memory.current");
      inactive_file = find_field(stat, "inactive_file");
    } else {
      limit = read_int_file(cgroup_dir_ + "/memory.limit_in_bytes");
      usage = read_int_file(cgroup_dir_ + "/memory.usage_in_bytes");
      inactive_file = find_field(stat, "total_inactive_file");
      if (!inactive_file) inactive_file = find_field(stat, "inactive_file");
    }
    unreclaimable = unreclaimable_bytes(cgroup_dir_, stat, v2_);
  }
  if (limit && total > 0 && *limit < total && usage) {
    r.cgroup_limited = true;
    r.limit_bytes = *limit;
    r.usage_bytes = *usage;
    if (unreclaimable) {
      // Everything here is charged to usage; a page counted twice (mlocked anonymous
      // memory is also unevictable) must not make it more than usage.
      r.unreclaimable_bytes = std::clamp<int64_t>(*unreclaimable, 0, *usage);
    } else {
      r.unreclaimable_bytes = *usage - std::clamp<int64_t>(inactive_file.value_or(0), 0, *usage);
    }
    r.reclaimable_bytes = r.usage_bytes - r.unreclaimable_bytes;
    r.available_bytes = std::max<int64_t>(0, std::min(r.limit_bytes - r.unreclaimable_bytes, mem_available));
  } else {
    r.limit_bytes = total;
    r.usage_bytes = total - mem_available;
    r.available_bytes = mem_available;
  }

  if (auto psi = read_file(proc_root_ + "/pressure/memory")) {
    // "some avg10=0.00 avg60=0.00 avg300=0.00 total=0"
    const size_t p = psi->find("some avg10=");
    if (p != std::string::npos) {
      const char* begin = psi->c_str() + p + 11;
      r.pressure_some_avg10 = std::strtod(begin, nullptr);
    }
  }
  return r;
}

std::optional<int64_t> parse_byte_size(std::string_view text) {
  std::string s(text);
  s.erase(std::remove_if(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); }),
          s.end());
  if (s.empty()) return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc()) return std::nullopt;
  std::string unit(end, static_cast<const char*>(s.data() + s.size()));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();  // "GB", "MiB", "B" -> "G", "MI", ""
  if (unit.size() == 2 && unit.back() == 'I') unit.pop_back();  // "MI" -> "M"
  double scale = 1;
  if (unit.empty()) scale = 1;
  else if (unit == "K") scale = 1024.0;
  else if (unit == "M") scale = 1024.0 * 1024;
  else if (unit == "G") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T") scale = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  const double bytes = value * scale;
  if (!(bytes >= 0) || bytes > 9.2e18) return std::nullopt;
  if (scale == 1 && bytes != std::floor(bytes)) return std::nullopt;  // "1.5" bytes
  return static_cast<int64_t>(std::llround(bytes));
}

}  // namespace spillway::engine

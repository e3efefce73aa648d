// util/fs.h — file-system helpers that return Results instead of throwing.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "kope/error.h"

namespace kope::util {

namespace fs = std::filesystem;

// Reads a whole file. Fails with io (or not_found) naming the path and errno text.
Result<std::string> read_file(const fs::path& path);

// Writes `data` to `path` atomically: a temporary beside it, fsync, rename, fsync of the
// directory. A reader sees the old or the new content, never a mix, even after a crash.
// Fails with io (disk full included) and leaves the old file in place.
Status write_file_atomic(const fs::path& path, std::string_view data);

// Appends one line (a '\n' is added) and fsyncs; used for JSONL event logs.
Status append_line_durable(const fs::path& path, std::string_view line);

// Creates the directory and its parents; succeeds if it already exists.
Status make_dirs(const fs::path& path);

// A fresh private directory (mode 0700) under `parent` (default: $TMPDIR or /tmp), removed with
// everything inside when the object is destroyed, unless keep() was called. Move-only.
class TempDir {
 public:
  static Result<TempDir> create(std::string_view prefix, const fs::path& parent = {});
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const fs::path& path() const { return m_path; }
  void keep() { m_keep = true; }

 private:
  explicit TempDir(fs::path path) : m_path(std::move(path)) {}
  fs::path m_path;
  bool m_keep = false;
};

// Resolves an executable name through $PATH; nullopt when not found.
std::optional<fs::path> find_executable(std::string_view name);

// Where kope keeps per-project data (memory database, run directories):
// $KOPE_DATA_DIR, else ./.kope in the current directory.
fs::path data_dir();

// Where kope keeps machine-local caches (hardware profile, compile cache, reference outputs):
// $KOPE_CACHE_DIR, else $XDG_CACHE_HOME/kope, else ~/.cache/kope.
fs::path cache_dir();

// Where the operator suite and prompt templates live: $KOPE_SHARE_DIR, else the installed tree
// (<prefix>/share/kope beside <prefix>/bin/kope, when it holds ops/), else the source tree the
// binary was built from.
fs::path share_dir();

// A data file shipped with kope, e.g. "starter/memory.json.zst": share_dir()/relative, else
// share_dir()/share/kope/relative (where the source tree keeps files that are installed into
// <prefix>/share/kope); nullopt when neither exists.
std::optional<fs::path> find_share_file(const fs::path& relative);

// Value of an environment variable, nullopt when unset or empty.
std::optional<std::string> get_env(const char* name);

}  // namespace kope::util

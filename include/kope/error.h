// kope/error.h — the one error type every fallible kope function returns.
//
// Functions that can fail return `kope::Result<T>` (a std::expected). Errors carry a kind, so the
// CLI can map them to exit codes (usage/config errors exit 2), and a human-readable message that
// already names the file, line or cause. Exceptions are used only at the CLI boundary.
//
// A failing *kernel* is not an Error: compile errors, crashes and wrong results are verdicts
// (see kope/eval.h). Error means kope itself could not do what was asked.
#pragma once

#include <expected>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace kope {

enum class ErrorKind {
  usage,     // the command line is wrong
  config,    // a spec, config or profile file is malformed or inconsistent
  not_found, // a named thing (file, op, profile, case id) does not exist
  io,        // the OS refused: open/read/write/spawn failed, disk full
  internal,  // an invariant broke inside kope
  unavailable, // a capability is missing on this machine (no GPU, no CANN, no sandbox)
  remote,    // a remote service (LLM endpoint) failed
  corrupt,   // stored data (database, cache, run dir) is damaged or of a foreign version
};

const char* error_kind_name(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::internal;
  std::string message;

  // Prefixes context ("while loading ops/x/op.toml: ") and returns the error, for chaining.
  Error&& with_context(std::string_view context) &&;
};

template <class T>
using Result = std::expected<T, Error>;

// The value type for functions that return nothing on success.
using Status = std::expected<void, Error>;

template <class... Args>
[[nodiscard]] std::unexpected<Error> fail(ErrorKind kind, fmt::format_string<Args...> format,
                                          Args&&... args) {
  return std::unexpected(Error{kind, fmt::format(format, std::forward<Args>(args)...)});
}

// Exit code the CLI uses for an error of this kind: 2 for usage/config/not_found, 1 otherwise.
int exit_code_for(ErrorKind kind);

}  // namespace kope

// KOPE_TRY(expr): evaluates a Result/Status; on error returns the error from the current function.
#define KOPE_TRY(expr)                                   \
  do {                                                   \
    auto&& kope_try_result_ = (expr);                    \
    if (!kope_try_result_) {                             \
      return std::unexpected(std::move(kope_try_result_).error()); \
    }                                                    \
  } while (0)

// KOPE_ASSIGN(var, expr): declares `var` from a Result, or returns its error.
#define KOPE_ASSIGN_CAT2_(a, b) a##b
#define KOPE_ASSIGN_CAT_(a, b) KOPE_ASSIGN_CAT2_(a, b)
#define KOPE_ASSIGN(decl, expr) KOPE_ASSIGN_IMPL_(decl, expr, KOPE_ASSIGN_CAT_(kope_r_, __LINE__))
#define KOPE_ASSIGN_IMPL_(decl, expr, tmp)               \
  auto tmp = (expr);                                     \
  if (!tmp) return std::unexpected(std::move(tmp).error()); \
  decl = std::move(*tmp)

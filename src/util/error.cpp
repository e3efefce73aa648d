#include "kope/error.h"

namespace kope {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage: return "usage";
    case ErrorKind::config: return "config";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::io: return "io";
    case ErrorKind::internal: return "internal";
    case ErrorKind::unavailable: return "unavailable";
    case ErrorKind::remote: return "remote";
    case ErrorKind::corrupt: return "corrupt";
  }
  return "unknown";
}

Error&& Error::with_context(std::string_view context) && {
  message = fmt::format("{}: {}", context, message);
  return std::move(*this);
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::usage:
    case ErrorKind::config:
    case ErrorKind::not_found:
      return 2;
    default:
      return 1;
  }
}

}  // namespace kope

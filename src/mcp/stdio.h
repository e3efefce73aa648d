// mcp/stdio.h — the stdio transport: newline-delimited JSON-RPC on a pair of file descriptors.
//
// The client writes one message per line to `in_fd` and reads one per line from `out_fd`;
// nothing else is ever written to `out_fd` (logs go to stderr). Requests that may run long
// (Server::is_long) run on their own thread, so ping, cancellation and other requests are
// answered meanwhile. When the input ends (the client closed it or went away) every request in
// flight is cancelled, and serve_stdio returns once each has stopped.
#pragma once

#include "kope/error.h"
#include "mcp/server.h"

namespace kope::mcp {

// The longest line read; a longer one is answered with a parse error and skipped.
inline constexpr size_t k_max_stdio_line = 64u << 20;

// Serves `server` until `in_fd` ends. Fails with io only when reading fails for another reason.
Status serve_stdio(Server& server, int in_fd, int out_fd);

}  // namespace kope::mcp

// `kope mcp`: kope's evaluator, memory and runs for the coding agents people already use, as a
// Model Context Protocol server (docs/design.md, "The MCP surface"). stdio by default (for
// agents that launch it); --http ADDR:PORT serves Streamable HTTP on loopback, and another
// address only with --allow-remote and a bearer token from an environment variable.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cli.h"
#include "mcp/http.h"
#include "mcp/server.h"
#include "mcp/stdio.h"
#include "mcp_tools.h"
#include "util/fs.h"

namespace kope::cli {

namespace {

struct McpOptions {
  std::string http;  // ADDR:PORT, :PORT or PORT
  bool allow_remote = false;
  std::string token_env;
  std::vector<std::string> allowed_origins;
  McpSettings settings;
};

struct Address {
  std::string host = "127.0.0.1";
  int port = 0;
};

Result<Address> parse_address(const std::string& text) {
  Address a;
  std::string port = text;
  size_t colon = text.rfind(':');
  if (colon != std::string::npos && text.find(']') == std::string::npos && text.find(':') != colon) {
    return fail(ErrorKind::usage, "--http {}: write an IPv6 address in brackets, e.g. [::1]:8765", text);
  }
  if (colon != std::string::npos) {
    std::string host = text.substr(0, colon);
    if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
    if (!host.empty()) a.host = host;
    port = text.substr(colon + 1);
  }
  try {
    size_t used = 0;
    a.port = std::stoi(port, &used);
    if (used != port.size() || a.port < 0 || a.port > 65535) throw std::out_of_range("port");
  } catch (const std::exception&) {
    return fail(ErrorKind::usage, "--http {}: expected ADDR:PORT, :PORT or PORT (0: any free port)", text);
  }
  return a;
}

std::string instructions() {
  return "kope judges compute kernels: eval_kernel compiles a kernel in a sandbox, verifies it on every case of the op's "
         "spec and times it against the reference, the vendor library and the roofline; its verdict is the one `kope eval` "
         "gives. Start with list_ops and show_op (the kernel signature and the reference), ask retrieve_experience what "
         "worked before on this machine, and record_attempt your kernels so kope's memory learns from them.";
}

Result<int> serve(const McpOptions& o) {
  std::optional<Address> address;
  if (!o.http.empty()) {
    KOPE_ASSIGN(Address a, parse_address(o.http));
    address = a;
  }
  std::string token;
  if (!o.token_env.empty()) {
    auto value = util::get_env(o.token_env.c_str());
    if (!value || value->empty()) return fail(ErrorKind::usage, "--token-env {}: that environment variable is not set or empty", o.token_env);
    token = *value;
  }
  if (address && !mcp::is_loopback_host(address->host)) {
    if (!o.allow_remote || token.empty()) {
      return fail(ErrorKind::usage,
                  "--http {}: serving on a non-loopback address needs --allow-remote and --token-env NAME (a bearer token "
                  "every request must carry)",
                  o.http);
    }
  } else if (o.allow_remote) {
    return fail(ErrorKind::usage, "--allow-remote applies to --http with a non-loopback address");
  }
  McpSettings settings = o.settings;
  settings.path_arguments = !o.allow_remote;
  McpKope kope(settings);
  mcp::ServerInfo info{"kope", "kope kernel evaluator", KOPE_VERSION, instructions()};
  mcp::Server server(info, kope.tools(), kope.resources());
  if (!address) {
    // stdout carries only protocol messages: anything else this process might print goes to
    // stderr instead.
    int protocol_out = ::dup(STDOUT_FILENO);
    if (protocol_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return fail(ErrorKind::io, "cannot set up stdout");
    std::fprintf(stderr, "kope mcp: serving MCP %s on stdio (logs on stderr)\n", std::string(mcp::k_protocol_version).c_str());
    KOPE_TRY(mcp::serve_stdio(server, STDIN_FILENO, protocol_out));
    ::close(protocol_out);
    return 0;
  }
  mcp::HttpOptions ho;
  ho.host = address->host;
  ho.port = address->port;
  ho.bearer_token = token;
  ho.allowed_origins = o.allowed_origins;
  // SIGINT and SIGTERM stop the server from a thread of its own (HttpServer::stop is no signal handler).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  KOPE_ASSIGN(auto http, mcp::HttpServer::bind(server, ho));
  std::string host = ho.host.find(':') != std::string::npos ? "[" + ho.host + "]" : ho.host;
  std::fprintf(stderr, "kope mcp: serving MCP %s on http://%s:%d/mcp%s\n", std::string(mcp::k_protocol_version).c_str(),
               host.c_str(), http->port(), token.empty() ? "" : " (bearer token required)");
  std::fflush(stderr);
  std::thread waiter([&http, stop_signals] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) http->stop();
  });
  Status served = http->serve();
  pthread_kill(waiter.native_handle(), SIGTERM);  // wakes the waiter if serve() ended on its own
  waiter.join();
  KOPE_TRY(served);
  return 0;
}

}  // namespace

void register_mcp(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("mcp", "Serve kope's evaluator, memory and runs to MCP clients (coding agents): stdio, or --http");
  auto o = std::make_shared<McpOptions>();
  cmd->add_option("--http", o->http,
                  "Serve Streamable HTTP on ADDR:PORT (default address 127.0.0.1; port 0: any free one) instead of stdio");
  cmd->add_flag("--allow-remote", o->allow_remote,
                "Allow --http on a non-loopback address (needs --token-env); its clients then name ops and runs only by "
                "name (no memory, suite or folder paths)");
  cmd->add_option("--token-env", o->token_env,
                  "Name of an environment variable holding a bearer token every HTTP request must carry (Authorization: Bearer)");
  cmd->add_option("--allow-origin", o->allowed_origins,
                  "An Origin allowed besides loopback ones, e.g. https://agent.example (repeatable; DNS rebinding protection)")
      ->allow_extra_args(false);
  cmd->add_option("--memory", o->settings.memory,
                  "Memory database of the memory tools (default: $KOPE_MEMORY, else <data dir>/memory.db)");
  cmd->add_option("--suite", o->settings.suite, "Operator suite op names are looked up in (default: the built-in ops/)");
  cmd->add_option("--eval-max-seconds", o->settings.eval_max_seconds,
                  "eval_kernel / record_attempt / start_run: default timing cap per timed case (default: kope eval's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--eval-ci", o->settings.eval_ci, "Their default target CI (default: kope eval's)")->check(CLI::Range(0.001, 0.5));
  cmd->callback([&action, o] {
    action = [o]() -> Result<int> { return serve(*o); };
  });
}

}  // namespace kope::cli

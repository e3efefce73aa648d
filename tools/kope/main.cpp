// kope — the command-line entry point. Parses arguments, runs the chosen command, and maps
// errors to exit codes: 0 success, 1 a failed outcome (e.g. a wrong kernel), 2 usage/config.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

#include "cli.h"

namespace kope::cli {

void print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

}  // namespace kope::cli

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  CLI::App app{"kope: an LLM agent that writes fast, verified compute kernels and learns from every attempt"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kope ") + KOPE_VERSION);
  kope::cli::Action action;
  kope::cli::register_ops(app, action);
  kope::cli::register_hw(app, action);
  kope::cli::register_report(app, action);
  kope::cli::register_llm(app, action);
  kope::cli::register_memory(app, action);
  kope::cli::register_eval(app, action);
  kope::cli::register_run(app, action);
  kope::cli::register_backends(app, action);
  kope::cli::register_transfer(app, action);
  kope::cli::register_ablate(app, action);
  kope::cli::register_prompts(app, action);
  kope::cli::register_mcp(app, action);
  if (argc >= 2 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "kope: error: unknown command '%s' (commands: %s; see kope --help)\n", argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kope: error: %s (see kope --help)\n", e.what());
    return 2;
  }
  if (!action) {
    std::fprintf(stderr, "kope: error: no command given (see kope --help)\n");
    return 2;
  }
  try {
    kope::Result<int> rc = action();
    if (!rc) {
      std::fprintf(stderr, "kope: error: %s\n", rc.error().message.c_str());
      return kope::exit_code_for(rc.error().kind);
    }
    return *rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kope: internal error: %s\n", e.what());
    return 1;
  }
}

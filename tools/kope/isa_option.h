// tools/kope/isa_option.h — `--isa`, the ISA level candidates are compiled for (hw/isa.h), on
// the commands that build kernels or read the hardware profile (run, eval, bench, hw).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "kope/error.h"

namespace kope::cli {

// Adds --isa (native, x86-64-v3, x86-64-v4) to `cmd`. `isa` stays empty when the option is not
// given ($KOPE_ISA, or native, then applies).
void add_isa_option(CLI::App* cmd, std::string& isa);

// Applies --isa before anything reads the toolchain, the hardware profile or the target: fails
// with config when the name is no level, this CPU is not x86-64 or lacks the level (the message
// names what it lacks); otherwise sets $KOPE_ISA, which they read and child processes inherit.
// With `isa` empty, checks $KOPE_ISA the same way. Not thread-safe (setenv): call it first.
Status apply_isa(const std::string& isa);

}  // namespace kope::cli

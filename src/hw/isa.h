// hw/isa.h — an x86-64 ISA level below the host's own (`--isa`), and the target it names.
//
// Under `--isa x86-64-v3` candidates are compiled for any x86-64-v3 CPU (-march=x86-64-v3
// -mtune=native: AVX2 and FMA, no AVX-512), the hardware probe is compiled and cached for that
// level (cache_dir()/hw-x86-64-v3.json), the prompt describes the level, and Target::host() is
// the target a CPU of exactly that level has ("x86_64-avx2-fma"), so memory recorded this way
// is keyed like an AVX2 machine's. The level travels in $KOPE_ISA, which the CLI sets from
// --isa after checking it (child processes inherit it); every reader below is thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "kope/target.h"

namespace kope {

enum class IsaLevel { native, x86_64_v3, x86_64_v4 };

// "native", "x86-64-v3", "x86-64-v4": the one name table --isa, $KOPE_ISA and -march use.
std::string_view isa_level_name(IsaLevel level);
// All names, in enum order (for --isa's check).
const std::vector<std::string>& isa_level_names();
// Parses a name; fails with config naming the accepted ones.
Result<IsaLevel> parse_isa_level(std::string_view name);
// The level this process compiles for: $KOPE_ISA, native when unset or empty. Fails with
// config when the variable names no level.
Result<IsaLevel> isa_level_from_env();
// The code-generation flags that choose the level: {"-march=native"} for native,
// {"-march=x86-64-v3", "-mtune=native"} for a level (its instructions, tuned for this CPU).
std::vector<std::string> isa_level_flags(IsaLevel level);
// The level compile flags name (their last -march=x86-64-vN); native when they name none.
IsaLevel isa_level_of_flags(const std::vector<std::string>& flags);

// The host CPU itself: arch plus the SIMD features this process can use (cpuid), whatever the
// level. (Target::host() is this at the level of $KOPE_ISA.)
Target host_cpu_target();

// The target a CPU of exactly `level` has: x86-64-v3 "x86_64-avx2-fma", x86-64-v4
// "x86_64-avx2-fma-avx512" (kope's "avx512" is the v4 set: F, BW, CD, DQ, VL); `cpu` itself for
// native. Fails with config when `cpu` is not x86_64 or lacks a feature of the level (the
// message names the missing features and the levels it has).
Result<Target> target_at_level(const Target& cpu, IsaLevel level);

// Whether code built for `built_for` can run on `host`: the same arch and every feature of
// `built_for` present there ("x86_64-avx2-fma" runs on "x86_64-avx2-fma-avx512", not back).
bool target_runs_on(const Target& built_for, const Target& host);

}  // namespace kope

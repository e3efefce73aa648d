// eval/library.h — the configuration vendor-library baselines (OpenBLAS, oneDNN) run with.
//
// A library baseline runs in a trusted runner whose environment kope builds from scratch: the
// thread count is always the candidates' (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS), and the
// library variables below come from the user's environment by default (library_env_default)
// or from a setting --library-config best chose. The runner reports what the library actually
// runs with (Session::library_report), which becomes the LibraryConfig every result records.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kope/eval.h"

namespace kope::eval {

// Library variables and their values for a runner; nullopt: unset (the library detects).
using LibraryEnv = std::vector<std::pair<std::string, std::optional<std::string>>>;

// The variables that choose a vendor library's configuration, per library.
const std::vector<std::string>& library_env_vars(std::string_view library);  // "openblas", "onednn"
// Every variable of both libraries, in a fixed order.
const std::vector<std::string>& all_library_env_vars();

// The default: each variable as the user's environment has it, except that an unset
// OPENBLAS_CORETYPE gets openblas_coretype_for_host() (OpenBLAS 0.3.21 misdetects newer CPUs
// as Prescott, see native.h), which is kope's stand-in for the library's own detection.
LibraryEnv library_env_default();

// "OPENBLAS_CORETYPE=Haswell ONEDNN_MAX_CPU_ISA=AVX2" over the variables that are set, in
// all_library_env_vars() order; the part of a baseline cache key that names its configuration.
std::string library_env_text(const LibraryEnv& env);

// The user's variables that force `library` away from its own choice, as "NAME=value" joined
// by ", "; "" when none is set.
std::string library_forced_by_environment(std::string_view library);

// The LibraryConfig of a runner for `library` from its report (Session::library_report), the
// setting's name and the environment it got. `candidate_threads` is the candidates' count: a
// library that runs with another count is marked forced.
LibraryConfig parse_library_report(std::string_view report, std::string_view library, std::string_view setting,
                                   const LibraryEnv& env, int candidate_threads);

// Sets c.setting and c.forced/forced_by: forced when `setting` is "environment" and the user's
// environment sets the library's variables, or when the library runs with another thread count
// than the candidates. Also for a configuration read back from a cache.
void mark_library_forced(LibraryConfig& c, std::string_view setting, int candidate_threads);

// A library's name as people write it: "OpenBLAS", "oneDNN", "cuBLAS", "cuBLASLt", "cuDNN",
// "cuda-naive (kope)" (kope's own straightforward CUDA kernel, where no vendor library fits);
// other names as they are.
std::string library_display_name(std::string_view library);

// oneDNN's dnnl_cpu_isa_t value as its ONEDNN_MAX_CPU_ISA name, lower case ("avx2",
// "avx512_core"); "0x..." for a value this kope does not know.
std::string onednn_isa_name(unsigned isa);

// One configuration to try.
struct LibrarySetting {
  std::string name;  // "environment", "auto", "openblas:SkylakeX", "onednn:AVX2"
  LibraryEnv env;
  std::string expect_core;  // OpenBLAS core types: the core the library must report (else the
                            // build does not have it and fell back to its detection)
};

// The settings --library-config best tries for `library` on this CPU: "environment", "auto"
// (every variable unset), the named OpenBLAS core types this CPU can execute (Sandybridge,
// Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids, by their ISA needs) or the oneDNN ISA caps
// (SSE41 ... AVX512_CORE_AMX; oneDNN itself caps them at what the CPU has, duplicates of an
// effective ISA are dropped after the runner reports it).
std::vector<LibrarySetting> library_settings_to_try(std::string_view library);

// The environment of the setting with this name (as library_settings_to_try names it).
std::optional<LibraryEnv> library_env_for_setting(std::string_view library, std::string_view setting);

// LibraryConfig as the JSON object results and caches hold, and back (missing fields: empty).
nlohmann::json library_config_to_json(const LibraryConfig& c);
LibraryConfig library_config_from_json(const nlohmann::json& j);

}  // namespace kope::eval

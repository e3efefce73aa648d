// eval/ascend/ascend.h — finding Huawei's CANN toolkit for the Ascend C backend definition.
//
// The backend's build commands, ABI and timing are written down in ABI.md beside this file.
// Nothing of it could be run where kope is developed (no CANN, no NPU); this header is the part
// that runs everywhere: it finds what is installed and says what is missing. Thread-safe.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/eval.h"
#include "kope/hw.h"
#include "kope/target.h"

namespace kope::eval::ascend {

namespace fs = std::filesystem;

struct Toolkit {
  fs::path home;                 // CANN root ($ASCEND_HOME_PATH, $ASCEND_TOOLKIT_HOME, default path)
  std::string home_from;         // which of those it came from
  std::optional<fs::path> ccec;  // the Ascend C compiler
  std::optional<fs::path> msprof;
  std::optional<fs::path> npu_smi;
  int npus = 0;                  // devices npu-smi lists
  // What is missing for building and timing Ascend C kernels here, one item each ("" none).
  std::vector<std::string> missing() const;
};

// Looks for CANN and the NPUs (runs `npu-smi info -l` when it exists). Never fails.
Toolkit find_toolkit();

// The backend's entries in the backend table (eval/registry.h).
inline constexpr std::string_view k_file_extension = ".cpp";  // Ascend C is C++ with extensions
Target target();                                               // ascend-910c

}  // namespace kope::eval::ascend

namespace kope::eval {

// What this machine has for the Ascend C backend (CANN, ccec, msprof, NPUs).
BackendInfo ascend_backend_info();
// Always unavailable: kope has no Ascend runner yet (the message says what is missing).
Result<std::unique_ptr<Evaluator>> make_ascend_evaluator(const HardwareProfile& hw, const EvaluatorOptions& options);

}  // namespace kope::eval

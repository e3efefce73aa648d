// The Ascend C backend definition: what kope needs from Huawei's CANN toolkit and how it finds
// it. Building and timing need CANN (ccec, msprof) and an Ascend NPU; neither exists on the
// machines kope is developed on, so this backend only reports what it finds (see ABI.md).
#include "eval/ascend/ascend.h"

#include "eval/backend.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace ascend {

Toolkit find_toolkit() {
  Toolkit t;
  for (const char* var : {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_AICPU_PATH"}) {
    if (auto v = util::get_env(var); v && !v->empty()) {
      t.home = *v;
      t.home_from = var;
      break;
    }
  }
  std::error_code ec;
  if (t.home.empty() && fs::exists("/usr/local/Ascend/ascend-toolkit/latest", ec)) {
    t.home = "/usr/local/Ascend/ascend-toolkit/latest";
    t.home_from = "the default install path";
  }
  auto find = [&](const char* name, std::initializer_list<const char*> rel) -> std::optional<fs::path> {
    if (!t.home.empty()) {
      for (const char* r : rel) {
        fs::path p = t.home / r / name;
        if (fs::exists(p, ec)) return p;
      }
    }
    return util::find_executable(name);
  };
  t.ccec = find("ccec", {"compiler/ccec_compiler/bin", "bin"});
  t.msprof = find("msprof", {"tools/profiler/bin", "bin"});
  t.npu_smi = util::find_executable("npu-smi");
  if (t.npu_smi) {
    util::RunOptions ro;
    ro.spawn.argv = {t.npu_smi->string(), "info", "-l"};
    ro.timeout = std::chrono::seconds(20);
    if (auto r = util::run(ro); r && r->status.success()) {
      for (auto& line : util::split(r->out, '\n')) {
        if (line.find("Chip Name") != std::string::npos || line.find("NPU ID") != std::string::npos) ++t.npus;
      }
    }
  }
  return t;
}

std::vector<std::string> Toolkit::missing() const {
  std::vector<std::string> m;
  if (home.empty()) m.push_back("the CANN toolkit ($ASCEND_HOME_PATH unset and /usr/local/Ascend/ascend-toolkit/latest absent)");
  if (!ccec) m.push_back("the Ascend C compiler ccec");
  if (!msprof) m.push_back("the profiler msprof (kernel-only timing)");
  if (npus == 0) m.push_back("an Ascend NPU (npu-smi lists none)");
  return m;
}

Target target() { return *Target::parse("ascend-910c"); }

}  // namespace ascend

BackendInfo ascend_backend_info() {
  BackendInfo b;
  b.built = true;
  ascend::Toolkit t = ascend::find_toolkit();
  if (t.ccec) b.toolchain = t.ccec->string();
  auto missing = t.missing();
  b.can_compile = !t.home.empty() && t.ccec.has_value();
  // kope has no Ascend runner yet: the definition (build commands, ABI, timing) is documented
  // and unverified, so it is never reported usable.
  b.usable = false;
  if (missing.empty()) {
    b.detail = "CANN found at " + t.home.string() + ", but kope's Ascend runner is a definition only (unverified; see src/eval/ascend/ABI.md)";
  } else {
    b.detail = "missing " + util::join(missing, "; ");
  }
  return b;
}

Result<std::unique_ptr<Evaluator>> make_ascend_evaluator(const HardwareProfile&, const EvaluatorOptions&) {
  BackendInfo info = ascend_backend_info();
  return fail(ErrorKind::unavailable, "the Ascend C backend cannot evaluate here: {} (see src/eval/ascend/ABI.md)", info.detail);
}

}  // namespace kope::eval

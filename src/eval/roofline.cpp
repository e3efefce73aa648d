// The roofline of a case (kope/hw.h has the model) and the note for a time beyond it.
#include "kope/eval.h"
#include "util/strings.h"

namespace kope::eval {

namespace {

bool any_tensor(const spec::OpSpec& op, bool (*pred)(spec::DType)) {
  for (const auto* list : {&op.inputs, &op.outputs}) {
    for (const auto& t : *list) {
      if (pred(t.dtype)) return true;
    }
  }
  return false;
}

}  // namespace

Roof case_roofline(const HardwareProfile& hw, const spec::OpSpec& op, const spec::Case& c) {
  if (!any_tensor(op, spec::dtype_is_float)) return hw.integer_roofline(op.flops_for(c), op.bytes_for(c));
  bool f64 = any_tensor(op, [](spec::DType t) { return t == spec::DType::f64; });
  return hw.roofline(op.flops_for(c), op.bytes_for(c), f64);
}

bool compute_floor_applies(const spec::OpSpec& op) {
  bool narrow = any_tensor(op, [](spec::DType t) { return !(t == spec::DType::f32 || t == spec::DType::f64); });
  return any_tensor(op, spec::dtype_is_float) && !narrow;
}

std::optional<std::string> apply_roofline(CaseTiming& t, const Roof& roof, const spec::OpSpec& op) {
  t.roofline_us = roof.seconds * 1e6;
  t.fraction_of_roofline = t.median_us > 0 ? t.roofline_us / t.median_us : 0;
  t.roofline_bound = std::string(roof.bound());
  t.roofline_gbps = roof.gbps;
  t.roofline_gflops = roof.gflops;
  t.roofline_working_set_bytes = roof.working_set_bytes;
  t.beyond_roofline = t.median_us > 0 && t.roofline_us > t.median_us + t.ci95_us;
  if (!t.beyond_roofline) return std::nullopt;
  return fmt::format(
      "case {} ({}) of {}: {:.4g} µs ±{:.2g} per call is {:.0f}% of the roofline of {:.4g} µs ({}; compute roof {:.4g} µs at "
      "{:.1f} GFLOP/s, memory roof {:.4g} µs at {:.1f} GB/s for {}): faster than the model allows by more than the CI, so "
      "kope's roofline model is wrong for this case (a kope bug to report, e.g. a hardware profile measured under load: "
      "`kope hw --refresh` on a quiet machine), not a fault of the kernel",
      t.case_index, t.label, op.name, t.median_us, t.ci95_us, 100 * t.fraction_of_roofline, t.roofline_us, roof.describe(),
      roof.compute_seconds * 1e6, roof.gflops, roof.memory_seconds * 1e6, roof.gbps,
      util::human_bytes(static_cast<double>(roof.working_set_bytes)));
}

}  // namespace kope::eval

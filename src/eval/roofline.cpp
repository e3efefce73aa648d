// The roofline of a case (kope/hw.h has the model) and the note for a time beyond it.
#include <algorithm>

#include "eval/measure.h"
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

// Whether the op's counted work is integer work on case `c`: no float tensor at all, or more
// bytes of integer inputs than of float ones (an int8 GEMM with a float scale per column is
// integer work; a float table gathered by integer indices is not).
bool integer_work(const spec::OpSpec& op, const spec::Case& c) {
  if (!any_tensor(op, spec::dtype_is_float)) return true;
  size_t integer = 0, floating = 0;
  for (const auto& t : op.inputs) (spec::dtype_is_float(t.dtype) ? floating : integer) += op.byte_size(t, c);
  return integer > floating;
}

// The working set a timed call sees: timing alternates k_rotating_sets data sets, in and out,
// from call to call (call_cycle), so a set is back in a cache only if all of them fit it. Read
// at one set's bytes, a case of 64 MiB on a machine whose curve still shows cache at 64 MiB
// would get a roof no call of the timing can reach.
uint64_t timed_working_set(double bytes) {
  return bytes > 0 ? static_cast<uint64_t>(bytes) * static_cast<uint64_t>(k_rotating_sets) : 0;
}

}  // namespace

Roof case_roofline(const HardwareProfile& hw, const spec::OpSpec& op, const spec::Case& c) {
  double bytes = op.bytes_for(c);
  if (integer_work(op, c)) return hw.integer_roofline(op.flops_for(c), bytes, timed_working_set(bytes));
  bool f64 = any_tensor(op, [](spec::DType t) { return t == spec::DType::f64; });
  return hw.roofline(op.flops_for(c), bytes, f64, timed_working_set(bytes));
}

bool compute_floor_applies(const spec::OpSpec& op) {
  bool narrow = any_tensor(op, [](spec::DType t) { return !(t == spec::DType::f32 || t == spec::DType::f64); });
  return any_tensor(op, spec::dtype_is_float) && !narrow;
}

bool bandwidth_now_applies(std::string_view backend, const HardwareProfile& hw, const Roof& roof) {
  if (backend != "cpu" || roof.bound() != "memory" || roof.gbps <= 0) return false;
  return roof.working_set_bytes > (hw.l3_bytes > 0 ? hw.l3_bytes : k_bandwidth_now_min_bytes);
}

std::optional<std::string> apply_roofline(CaseTiming& t, const Roof& profile_roof, const spec::OpSpec& op, double bandwidth_now_gbps) {
  Roof roof = profile_roof;
  if (bandwidth_now_gbps > 0 && profile_roof.gbps > 0) {
    roof.gbps = bandwidth_now_gbps;
    roof.memory_seconds = profile_roof.memory_seconds * profile_roof.gbps / bandwidth_now_gbps;
    roof.seconds = std::max(roof.compute_seconds, roof.memory_seconds);
    t.roofline_gbps_profile = profile_roof.gbps;
  }
  t.roofline_us = roof.seconds * 1e6;
  t.fraction_of_roofline = t.median_us > 0 ? t.roofline_us / t.median_us : 0;
  t.roofline_bound = std::string(roof.bound());
  t.roofline_gbps = roof.gbps;
  t.roofline_gflops = roof.gflops;
  t.roofline_working_set_bytes = roof.working_set_bytes;
  // Beyond the faster of the two roofs only: the bandwidth now may be below what the machine
  // delivers at its best.
  if (profile_roof.seconds < roof.seconds) roof = profile_roof;
  t.beyond_roofline = t.median_us > 0 && roof.seconds * 1e6 > t.median_us + t.ci95_us;
  if (!t.beyond_roofline) return std::nullopt;
  // The roof is the spec's work count at the measured peaks: a kernel beyond it does less work
  // than the count assumes (fewer operations for the same result, data reused from a cache the
  // working set does not fit), or the profile underestimates this machine.
  const spec::Case* c = t.case_index >= 0 && static_cast<size_t>(t.case_index) < op.cases.size() ? &op.cases[static_cast<size_t>(t.case_index)] : nullptr;
  std::string flops = fmt::format("flops = {}", op.flops.text()), bytes = fmt::format("bytes = {}", op.bytes.text());
  if (c) {
    flops += fmt::format(" = {:.4g} here", op.flops_for(*c));
    bytes += fmt::format(" = {} here", util::human_bytes(op.bytes_for(*c)));
  }
  bool memory = roof.bound() == "memory";
  std::string count = memory ? bytes : flops;
  std::string fewer = memory ? "moves fewer bytes than the count assumes (it reuses data from a cache, or reads or writes less than "
                               "the count's tensors)"
                             : "does fewer operations than the count assumes (the same result by another form: e.g. a GEMM form "
                               "needs 2 flops per multiply-add where a count may assume 3)";
  return fmt::format(
      "case {} of {}: {:.4g} µs ±{:.2g} per call is {:.0f}% of the roofline of {:.4g} µs ({}; compute roof {:.4g} µs at "
      "{:.1f} GFLOP/s, memory roof {:.4g} µs at {:.1f} GB/s for {}). The roof is the spec's work count at this machine's "
      "measured peaks ({}), so a kernel beyond it {}; that is no fault of the kernel, and its fraction of the roofline "
      "overstates it. If the kernel does all the counted work, the hardware profile underestimates this machine (`kope hw "
      "--refresh` on a quiet machine)",
      t.label, op.name, t.median_us, t.ci95_us, 100 * roof.seconds * 1e6 / t.median_us, roof.seconds * 1e6, roof.describe(),
      roof.compute_seconds * 1e6, roof.gflops, roof.memory_seconds * 1e6, roof.gbps,
      util::human_bytes(static_cast<double>(roof.working_set_bytes)), count, fewer);
}

}  // namespace kope::eval

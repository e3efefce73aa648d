// kope/hw.h — the hardware profile: what this machine is and how fast it can go.
//
// The profile gives every case of an op its roofline (HardwareProfile::roofline, the one model
// the evaluator, the reports, the prompts, the agent's stop rule and the memory use):
//   compute roof = flops / the peak of the op's dtype (FP64 FMA peak for f64 ops, FP32 FMA peak
//                  for the other ops with float tensors, f16/bf16 included: they compute in
//                  f32 on CPUs without native half arithmetic); ops with no float tensor at all
//                  have no compute roof (no integer peak is measured): the memory roof only;
//   memory roof  = bytes / the bandwidth the measured curve gives at the case's working set
//                  (`bytes` is the op's `bytes` expression: the bytes one call touches; the
//                  evaluator's working set is that of the data sets timing alternates,
//                  k_rotating_sets x bytes, eval::case_roofline), interpolated linearly in
//                  log2(working set) between the two neighbouring measured points, the first
//                  point's bandwidth below the curve, the last point's (DRAM) above it;
//   roofline     = max(compute roof, memory roof).
// Peaks are measured by a probe compiled with the same compiler and flags candidates use (-O3
// -march=native -fopenmp, or the --isa level's, hw/isa.h), then cached in cache_dir()/hw.json
// (hw-x86-64-v3.json per level); reused only when the CPU model, core count and target match.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"
#include "kope/target.h"

namespace kope {

struct BandwidthPoint {
  uint64_t working_set_bytes = 0;
  double gbps = 0;  // triad bandwidth (STREAM counting: 3 words per element), all cores
};

// One case's roofline: what bounds its time on this machine, and with which figures.
struct Roof {
  double seconds = 0;             // max(compute_seconds, memory_seconds)
  double compute_seconds = 0;     // flops / (gflops * 1e9)
  double memory_seconds = 0;      // bytes / (gbps * 1e9)
  double gflops = 0;              // the compute peak used (of the op's dtype)
  double gbps = 0;                // the bandwidth used (from the curve at working_set_bytes)
  uint64_t working_set_bytes = 0; // the working set the bandwidth was read at
  bool f64 = false;               // the FP64 peak was used
  bool integer = false;           // an op without floating-point tensors: the integer peak was used
  // An op without floating-point tensors on a profile without an integer peak (an older
  // probe): its roofline is the memory roof alone (gflops and compute_seconds stay 0).
  bool memory_only = false;
  // "memory" or "compute": the larger of the two roofs.
  std::string_view bound() const { return memory_seconds >= compute_seconds ? "memory" : "compute"; }
  // "memory roof: 8.0 MiB at 120.3 GB/s" / "compute roof: 576.0 GFLOP/s FP32".
  std::string describe() const;
};

// The version of the probe's measurements (FP64 peak, small working sets): a cached hw.json
// of an older probe is measured again (3: FMA chains that fit the vector registers; 4: beyond
// the last-level cache, the better of plain and streaming-store triads, and the integer peak;
// 5: the integer peak in the widest int8 dot product of the level, AVX-512 VNNI or BW on zmm;
// 6: each thread on a CPU of its own, so the triad's two threads never share one; 7: beyond
// the cores' own caches, the threads' concurrent time, never the sum of each one's best pass).
inline constexpr int k_hw_probe_version = 7;

struct HardwareProfile {
  Target target;
  std::string cpu_model;
  int cores = 1;               // CPUs this process may run on
  uint64_t l1d_bytes = 0;      // per core
  uint64_t l2_bytes = 0;       // per core
  uint64_t l3_bytes = 0;       // shared, as the OS reports it
  uint64_t memory_bytes = 0;
  double peak_gflops = 0;      // FP32 FMA throughput, all cores
  double peak_gflops_core = 0; // one core
  double peak_gflops_f64 = 0;  // FP64 FMA throughput, all cores (0: not measured; FP32 is used)
  double peak_gflops_f64_core = 0;
  // Integer multiply-add throughput in GOP/s (a multiply and an add are 2 ops), all cores and
  // one core: the int8 dot-product rate (AVX2 vpmaddubsw; the int16 multiply-add without it),
  // the fastest integer arithmetic the ISA has, so it bounds every integer op from above.
  // 0: not measured (an older probe).
  double peak_giops = 0;
  double peak_giops_core = 0;
  double peak_gbps = 0;        // DRAM triad bandwidth, all cores (largest working set)
  std::vector<BandwidthPoint> bandwidth;  // by working-set size, increasing
  std::string compiler;        // the probe's compiler and version
  std::string measured_at;     // ISO 8601 UTC
  int probe_version = 0;       // k_hw_probe_version of the measurement (0: before versions)

  // Bandwidth a working set of this size can see: the point with the smallest size >= ws
  // (the fastest point when ws is smaller than all).
  double gbps_for_working_set(uint64_t working_set_bytes) const;
  // The bandwidth of the curve at this working set: linear in log2(working set) between the
  // neighbouring measured points; the first point's below the curve, the last point's above it;
  // peak_gbps without a curve. A working set larger than the last-level cache (l3_bytes, when
  // known) streams from DRAM: it gets the DRAM triad figure (peak_gbps), never a value read
  // toward the cached points above it (a single-pass kernel over such a set cannot reach them).
  double gbps_at(uint64_t working_set_bytes) const;
  // The compute peak for an op of this dtype class: peak_gflops_f64 for f64 (peak_gflops when
  // it was not measured), peak_gflops otherwise.
  double peak_gflops_for(bool f64) const;
  // The working-set roofline of a case (see the header comment): `bytes` is the traffic of one
  // call, read at the bandwidth of a working set of `working_set_bytes` (0: `bytes` itself).
  Roof roofline(double flops, double bytes, bool f64, uint64_t working_set_bytes = 0) const;
  // The memory roof alone (Roof::memory_only).
  Roof memory_roofline(double bytes, uint64_t working_set_bytes = 0) const;
  // The roofline of an op without floating-point tensors: the integer peak (`ops` the op's
  // flops expression, counted as integer ops) and the memory roof; the memory roof alone when
  // the profile has no integer peak.
  Roof integer_roofline(double ops, double bytes, uint64_t working_set_bytes = 0) const;
  // The DRAM roofline in seconds: max(flops / peak_gflops, bytes / peak_gbps). Not the model
  // figures use (roofline() is); kept for callers that want the DRAM-only bound.
  double roofline_seconds(double flops, double bytes) const;
  // The lowest believable time: like roofline_seconds, but with the bandwidth the working set
  // can see in cache (and the FP32 peak, the highest). A measured time below this is not
  // physically possible here: the conservative bound the floor check and the memory's
  // quarantine rule use.
  double floor_seconds(double flops, double bytes, uint64_t working_set_bytes) const;
  // What a case's floor check and the memory's quarantine use: floor_seconds over this. The
  // profile's figures are measurements, not limits: a read-mostly stream runs faster than the
  // triad's mix, a profile measured beside other load is low, and a kernel at 100% of such a
  // roof must be reported as the model's error, never distrusted. What no honest kernel
  // reaches lies beyond this margin.
  static constexpr double k_floor_headroom = 1.5;

  std::string to_json() const;
  static Result<HardwareProfile> from_json(std::string_view text);
};

// Reads the cached profile when it matches this machine and was measured by this probe version
// (an older file, e.g. one without the FP64 peak, is measured again and replaced), otherwise
// measures (a few seconds) and caches it. `refresh` forces a new measurement. Fails with io when the probe cannot be
// compiled or run, with config when $KOPE_ISA names no level.
Result<HardwareProfile> load_hardware_profile(bool refresh = false);

// The triad bandwidth in GB/s at this working set now (min(working_set_bytes,
// k_bandwidth_now_max_bytes)), on `threads` threads each on a CPU of its own: the better of the
// median plain and the median streaming-store pass of `reps` each. The probe's triad in this
// process, for a roof read beside a kernel's timing (the profile's curve is measured once, and
// past the cores' own caches a shared host's bandwidth moves with its neighbours' load). 0 when
// it cannot be measured (the memory cannot be mapped). Runs the passes under a lock: one
// measurement at a time in a process.
double measure_bandwidth_now(uint64_t working_set_bytes, int threads, int reps);
// The largest working set measure_bandwidth_now reads: well past any last-level cache, where the
// bandwidth no longer depends on the set's size.
inline constexpr uint64_t k_bandwidth_now_max_bytes = uint64_t{256} << 20;

// The host's static facts without measuring (target, model, cores, caches, memory).
HardwareProfile describe_host();

}  // namespace kope

// kope/hw.h — the hardware profile: what this machine is and how fast it can go.
//
// The profile gives every op its roofline floor max(flops / peak_flops, bytes / bandwidth).
// Peaks are measured by a probe compiled with the same compiler and flags candidates use
// (-O3 -march=native -fopenmp), then cached in cache_dir()/hw.json; a cached profile is reused
// only when the CPU model, core count and target still match.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kope/error.h"
#include "kope/target.h"

namespace kope {

struct BandwidthPoint {
  uint64_t working_set_bytes = 0;
  double gbps = 0;  // triad bandwidth (STREAM counting: 3 words per element), all cores
};

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
  double peak_gbps = 0;        // DRAM triad bandwidth, all cores (largest working set)
  std::vector<BandwidthPoint> bandwidth;  // by working-set size, increasing
  std::string compiler;        // the probe's compiler and version
  std::string measured_at;     // ISO 8601 UTC

  // Bandwidth a working set of this size can see: the point with the smallest size >= ws
  // (the fastest point when ws is smaller than all).
  double gbps_for_working_set(uint64_t working_set_bytes) const;
  // DRAM roofline in seconds: max(flops / peak_gflops, bytes / peak_gbps).
  double roofline_seconds(double flops, double bytes) const;
  // The lowest believable time: like roofline_seconds, but with the bandwidth the working set
  // can see in cache. A measured time below this is not physically possible here.
  double floor_seconds(double flops, double bytes, uint64_t working_set_bytes) const;

  std::string to_json() const;
  static Result<HardwareProfile> from_json(std::string_view text);
};

// Reads the cached profile when it matches this machine, otherwise measures (a few seconds)
// and caches it. `refresh` forces a new measurement. Fails with io when the probe cannot be
// compiled or run.
Result<HardwareProfile> load_hardware_profile(bool refresh = false);

// The host's static facts without measuring (target, model, cores, caches, memory).
HardwareProfile describe_host();

}  // namespace kope

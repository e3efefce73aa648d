// eval/cuda/gpu_probe.h — the GPU's roofline figures, measured on the device and cached.
//
// The probe (gpu_probe.inc) is a standalone CUDA program kope compiles with the toolkit's nvcc
// for the toolkit's arch and runs once per GPU: FP32 and FP64 FMA throughput (independent FMA
// chains on every SM), TF32 and FP16 tensor-core throughput (wmma mma_sync on register
// fragments) and the STREAM triad's bandwidth at working sets from 8 MiB (inside L2) to
// 1.5 GiB (HBM). Its result is cached in cache_dir()/gpu-hw.json (one entry per GPU model and
// probe version, like the CPU's hw.json). Where the probe cannot run (no GPU, no nvcc, a
// failure), the device profile falls back to kope's table (cuda::gpu_profile). Thread-safe.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kope/error.h"
#include "kope/hw.h"

namespace kope::eval::cuda {

struct Gpu;
struct Toolkit;

// Bumped whenever the probe measures differently: cached entries of older versions are
// measured again.
inline constexpr int k_gpu_probe_version = 1;

struct GpuMeasurement {
  std::string name;          // "NVIDIA H200" (the driver's name)
  std::string compute_cap;   // "9.0"
  int sms = 0;
  int clock_mhz = 0;         // the SM clock the driver reports (boost)
  int memory_clock_mhz = 0;
  int bus_bits = 0;
  uint64_t memory_bytes = 0;
  uint64_t l2_bytes = 0;
  uint64_t shared_per_block_optin = 0;  // shared memory a block may opt in to
  uint64_t shared_per_sm = 0;
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  double fp32_gflops = 0;    // measured FMA throughput (an FMA is 2 flops)
  double fp64_gflops = 0;
  double tf32_gflops = 0;    // tensor cores (0: the arch has none / not measured)
  double fp16_gflops = 0;
  std::vector<BandwidthPoint> bandwidth;  // triad, by working set, increasing
  std::string nvcc;          // the toolkit that built the probe
  std::string measured_at;   // ISO 8601 UTC
  int probe_version = 0;

  // The bandwidth of the largest working set (HBM), 0 without a curve.
  double hbm_gbps() const;
  std::string to_json() const;
  static Result<GpuMeasurement> from_json(std::string_view text);
};

// Parses the probe's stdout (one JSON object) into a measurement (nvcc, time and version are
// the caller's).
Result<GpuMeasurement> parse_probe_output(std::string_view out);

// The probe's CUDA source, and its build into `dir`/probe with `tk`'s nvcc for tk.arch.
std::string_view gpu_probe_source();
Result<std::filesystem::path> build_gpu_probe(const Toolkit& tk, const std::filesystem::path& dir);

// Builds the probe and runs it on the first GPU under the timing lock (time limit: 120 s).
Result<GpuMeasurement> run_gpu_probe(const Toolkit& tk);

// The cached measurement of `gpu` in the file at `cache` when its name, compute capability,
// memory size and probe version match; otherwise `measure` is called and its result stored
// there (other GPUs' entries are kept). `refresh`: measure again in any case.
Result<GpuMeasurement> load_gpu_measurement(const std::filesystem::path& cache, const Gpu& gpu, bool refresh,
                                            const std::function<Result<GpuMeasurement>()>& measure);

// The device profile of `gpu`: from the measurement when there is one (peaks, the measured
// bandwidth curve), else kope's table (gpu_profile). FP32's peak is the FMA figure (tensor-core
// peaks are reported, not used: the roofline of an f32 op is the FP32 one).
HardwareProfile profile_from_measurement(const Gpu& gpu, const std::string& arch, const std::optional<GpuMeasurement>& m);

// What the CUDA backend uses: the first GPU's measurement (cache_dir()/gpu-hw.json, measured
// when missing), once per process; nullopt with `why` set when there is no GPU or the probe
// failed (the table then stands in).
const std::optional<GpuMeasurement>& device_measurement(std::string* why = nullptr);

}  // namespace kope::eval::cuda

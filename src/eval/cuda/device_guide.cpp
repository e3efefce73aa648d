// The CUDA backend's facts for the prompt's hardware section: the GPU as kope's probe measured
// it (or kope's table), and what the kernel ABI allows (ABI.md).
#include "eval/cuda/cuda.h"
#include "eval/cuda/gpu_probe.h"
#include "eval/registry.h"
#include "util/strings.h"

namespace kope::eval::cuda {

void describe_device(HardwareGuide& g) {
  const Toolkit& tk = toolkit();
  g.arch = tk.arch;
  g.toolkit = tk.nvcc ? "nvcc " + tk.nvcc_version : std::string();
  if (tk.gpus.empty()) return;
  const Gpu& gpu = tk.gpus.front();
  g.device_name = gpu.name;
  g.compute_capability = gpu.compute_cap;
  g.device_memory_bytes = gpu.memory_bytes;
  std::string why;
  const auto& m = device_measurement(&why);
  describe_measurement(g, m, gpu_profile(gpu, tk.arch), why);
}

void describe_measurement(HardwareGuide& g, const std::optional<GpuMeasurement>& m, const HardwareProfile& table, std::string_view why) {
  if (!m) {
    g.fp32_gflops = table.peak_gflops;
    g.bandwidth = {{0, table.peak_gbps}};
    g.peaks_source = fmt::format("kope's table of known GPUs (the probe did not run: {})", why.empty() ? "unknown reason" : why);
    return;
  }
  g.device_name = m->name;
  g.compute_capability = m->compute_cap;
  g.compute_units = m->sms;
  g.device_memory_bytes = m->memory_bytes;
  g.l2_bytes = m->l2_bytes;
  g.shared_per_block_bytes = m->shared_per_block_optin;
  g.shared_per_sm_bytes = m->shared_per_sm;
  g.clock_mhz = m->clock_mhz;
  g.max_threads_per_sm = m->max_threads_per_sm;
  g.regs_per_sm = m->regs_per_sm;
  g.fp32_gflops = m->fp32_gflops;
  g.fp64_gflops = m->fp64_gflops;
  g.tf32_gflops = m->tf32_gflops;
  g.fp16_gflops = m->fp16_gflops;
  g.bandwidth = m->bandwidth;
  g.peaks_source = fmt::format("measured on this GPU by kope's probe{}", m->measured_at.empty() ? "" : " at " + m->measured_at);
}

// Only the GPU: `hw` is the device's profile (the evaluator's), and nothing of the host CPU that
// launches the kernels appears (its caches and peaks would mislead).
std::string device_section(const HardwareProfile& hw, const HardwareGuide& given) {
  HardwareGuide g = given;
  if (g.fp32_gflops <= 0 && hw.peak_gflops > 0 && !hw.cpu_model.empty()) {  // a known GPU the guide did not see
    g.fp32_gflops = hw.peak_gflops;
    g.fp64_gflops = hw.peak_gflops_f64;
    if (g.bandwidth.empty() && hw.peak_gbps > 0) g.bandwidth = {{0, hw.peak_gbps}};
    if (g.device_name.empty()) g.device_name = hw.cpu_model;
    if (g.peaks_source.empty()) g.peaks_source = "the evaluator's profile of this GPU";
  }
  auto bytes = [](uint64_t b) { return util::human_bytes(static_cast<double>(b)); };
  auto tflops = [](double gflops) { return fmt::format("{:.1f} TFLOP/s", gflops / 1000.0); };
  std::string out;
  std::string gpu = g.device_name.empty() ? std::string("unknown (no GPU was found where this prompt was written)") : g.device_name;
  if (!g.compute_capability.empty()) gpu += fmt::format(", compute capability {}", g.compute_capability);
  out += fmt::format("- GPU: {}; kernels are compiled for {}{}\n", gpu, g.arch.empty() ? "sm_90" : g.arch,
                     g.toolkit.empty() ? "" : " by " + g.toolkit);
  std::vector<std::string> units;
  if (g.compute_units > 0) units.push_back(fmt::format("{} SMs", g.compute_units));
  if (g.clock_mhz > 0) units.push_back(fmt::format("{} MHz boost clock", g.clock_mhz));
  if (g.max_threads_per_sm > 0) units.push_back(fmt::format("at most {} resident threads per SM", g.max_threads_per_sm));
  if (g.regs_per_sm > 0) units.push_back(fmt::format("{} 32-bit registers per SM", g.regs_per_sm));
  if (!units.empty()) out += "- streaming multiprocessors: " + util::join(units, ", ") + "\n";
  std::vector<std::string> mem;
  if (g.device_memory_bytes > 0) mem.push_back(bytes(g.device_memory_bytes) + " device memory");
  if (g.l2_bytes > 0) mem.push_back(bytes(g.l2_bytes) + " L2");
  if (g.shared_per_sm_bytes > 0) mem.push_back(bytes(g.shared_per_sm_bytes) + " shared memory per SM");
  if (g.shared_per_block_bytes > 0) {
    mem.push_back(fmt::format("up to {} per block (above 48 KiB only after cudaFuncSetAttribute("
                              "cudaFuncAttributeMaxDynamicSharedMemorySize), which kope_kernel may call)",
                              bytes(g.shared_per_block_bytes)));
  }
  if (!mem.empty()) out += "- memory: " + util::join(mem, ", ") + "\n";
  if (g.fp32_gflops > 0) {
    std::vector<std::string> peaks = {"FP32 FMA " + tflops(g.fp32_gflops)};
    if (g.fp64_gflops > 0) peaks.push_back("FP64 FMA " + tflops(g.fp64_gflops));
    if (g.tf32_gflops > 0) peaks.push_back("TF32 tensor cores " + tflops(g.tf32_gflops));
    if (g.fp16_gflops > 0) peaks.push_back("FP16 tensor cores (FP32 accumulate) " + tflops(g.fp16_gflops));
    out += fmt::format("- compute peaks ({}; an FMA counts as 2 flops): {}\n", g.peaks_source, util::join(peaks, ", "));
    if (g.tf32_gflops > 0) {
      out += "- TF32 and FP16 tensor cores round FP32 inputs (10-bit mantissa): use them for an f32 op only when its tolerance "
             "allows it; the roofline of an f32 op is the FP32 FMA peak\n";
    }
  }
  if (!g.bandwidth.empty()) {
    std::vector<std::string> bw;
    for (const auto& pt : g.bandwidth) {
      bw.push_back(pt.working_set_bytes > 0 ? fmt::format("{:.0f} GB/s at {}", pt.gbps, bytes(pt.working_set_bytes))
                                            : fmt::format("{:.0f} GB/s", pt.gbps));
    }
    out += fmt::format("- memory bandwidth (STREAM triad a[i] = b[i] + s*c[i], by working set; beyond L2 it is HBM): {}\n",
                       util::join(bw, ", "));
  }
  out += "- the ABI: kope_kernel is host code that only launches __global__ kernels on the default stream (<<<>>>, "
         "cudaLaunchKernel) and may query attributes and occupancy; no cudaMalloc, cudaMemcpy, streams, events, "
         "synchronisation, driver API or vendor libraries (cuBLAS, cuDNN); the timed figure is the device time of the "
         "launches (events around kope_kernel)\n";
  out += "- the speedup that matters is against the GPU vendor baseline where the op has one (cuBLAS, cuBLASLt, cuDNN, or "
         "kope's straightforward CUDA kernel, labelled cuda-naive), timed the same way on this GPU\n";
  return out;
}

}  // namespace kope::eval::cuda

// The CUDA backend's pure logic, no GPU and no nvcc needed: the GPU probe's output and its
// cache (one entry per GPU, measured again for another GPU or probe version), the device
// profile from a measurement and the table fallback, the prompt guide's lines, the choice of
// each op's GPU baseline and the library report of GPU baselines.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "eval/backend.h"
#include "eval/cuda/cuda.h"
#include "eval/cuda/gpu_probe.h"
#include "eval/library.h"
#include "eval/registry.h"
#include "kope/spec.h"
#include "util/fs.h"
#include "util/strings.h"

namespace kope::eval::cuda {
namespace {

namespace fs = std::filesystem;

const char* k_probe_out =
    "{\"name\": \"NVIDIA H200\", \"compute_cap\": \"9.0\", \"sms\": 132, \"clock_mhz\": 1980, \"memory_clock_mhz\": 3201, "
    "\"bus_bits\": 6144, \"memory_bytes\": 150754820096, \"l2_bytes\": 62914560, \"shared_per_block_optin\": 232448, "
    "\"shared_per_sm\": 233472, \"regs_per_sm\": 65536, \"max_threads_per_sm\": 2048, \"fp32_gflops\": 65123.4, "
    "\"fp64_gflops\": 32100.0, \"tf32_gflops\": 370000.0, \"fp16_gflops\": 740000.0, \"bandwidth\": ["
    "{\"working_set_bytes\": 8388600, \"gbps\": 9000.5}, {\"working_set_bytes\": 1610612724, \"gbps\": 4310.2}]}\n";

Gpu h200() { return Gpu{"NVIDIA H200", "9.0", 143771ull << 20}; }

GpuMeasurement sample() {
  auto m = parse_probe_output(k_probe_out);
  EXPECT_TRUE(m) << m.error().message;
  GpuMeasurement out = *m;
  out.probe_version = k_gpu_probe_version;
  out.nvcc = "release 13.0, V13.0.88";
  out.measured_at = "2026-12-04T19:00:00Z";
  return out;
}

TEST(GpuProbe, ParsesItsOutput) {
  GpuMeasurement m = sample();
  EXPECT_EQ(m.name, "NVIDIA H200");
  EXPECT_EQ(m.compute_cap, "9.0");
  EXPECT_EQ(m.sms, 132);
  EXPECT_DOUBLE_EQ(m.fp32_gflops, 65123.4);
  EXPECT_DOUBLE_EQ(m.tf32_gflops, 370000.0);
  ASSERT_EQ(m.bandwidth.size(), 2u);
  EXPECT_DOUBLE_EQ(m.hbm_gbps(), 4310.2);
  auto back = GpuMeasurement::from_json(m.to_json());
  ASSERT_TRUE(back);
  EXPECT_EQ(back->to_json(), m.to_json());
}

TEST(GpuProbe, RejectsUnusableOutput) {
  EXPECT_FALSE(parse_probe_output("kope gpu probe: cudaSetDevice(dev): no CUDA-capable device is detected\n"));
  EXPECT_FALSE(parse_probe_output("{\"name\": \"x\", \"compute_cap\": \"9.0\", \"sms\": 0, \"fp32_gflops\": 0, \"bandwidth\": []}"));
  EXPECT_FALSE(parse_probe_output("{\"name\": "));
}

TEST(GpuProbe, CachesOneEntryPerGpu) {
  auto tmp = util::TempDir::create("kope-gpu-cache-");
  ASSERT_TRUE(tmp);
  fs::path cache = tmp->path() / "sub" / "gpu-hw.json";
  int runs = 0;
  auto measure = [&]() -> Result<GpuMeasurement> {
    ++runs;
    return sample();
  };
  auto a = load_gpu_measurement(cache, h200(), false, measure);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(runs, 1);
  auto b = load_gpu_measurement(cache, h200(), false, measure);
  ASSERT_TRUE(b);
  EXPECT_EQ(runs, 1) << "the second load must come from the cache";
  EXPECT_DOUBLE_EQ(b->fp32_gflops, a->fp32_gflops);
  // Another GPU is measured, and both entries are kept.
  auto other = [&]() -> Result<GpuMeasurement> {
    ++runs;
    GpuMeasurement m = sample();
    m.name = "NVIDIA A100-SXM4-80GB";
    m.compute_cap = "8.0";
    m.memory_bytes = 85899345920;
    return m;
  };
  ASSERT_TRUE(load_gpu_measurement(cache, Gpu{"NVIDIA A100-SXM4-80GB", "8.0", 81920ull << 20}, false, other));
  EXPECT_EQ(runs, 2);
  ASSERT_TRUE(load_gpu_measurement(cache, h200(), false, measure));
  EXPECT_EQ(runs, 2) << "the H200's entry must survive the A100's";
  // --refresh measures again.
  ASSERT_TRUE(load_gpu_measurement(cache, h200(), true, measure));
  EXPECT_EQ(runs, 3);
}

TEST(GpuProbe, OlderProbeVersionAndDamageAreMeasuredAgain) {
  auto tmp = util::TempDir::create("kope-gpu-cache-");
  ASSERT_TRUE(tmp);
  fs::path cache = tmp->path() / "gpu-hw.json";
  GpuMeasurement old = sample();
  old.probe_version = k_gpu_probe_version - 1;
  ASSERT_TRUE(util::write_file_atomic(cache, "{\"gpus\": [" + old.to_json() + "]}"));
  int runs = 0;
  auto measure = [&]() -> Result<GpuMeasurement> {
    ++runs;
    return sample();
  };
  ASSERT_TRUE(load_gpu_measurement(cache, h200(), false, measure));
  EXPECT_EQ(runs, 1);
  ASSERT_TRUE(util::write_file_atomic(cache, "{not json"));
  ASSERT_TRUE(load_gpu_measurement(cache, h200(), false, measure));
  EXPECT_EQ(runs, 2);
  // A failing probe is the caller's error (the backend then falls back to the table).
  auto failing = []() -> Result<GpuMeasurement> { return fail(ErrorKind::unavailable, "no CUDA device"); };
  auto r = load_gpu_measurement(cache, Gpu{"NVIDIA L4", "8.9", 23034ull << 20}, false, failing);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no CUDA device"), std::string::npos);
}

TEST(GpuProbe, ProfileFromMeasurementOrTable) {
  HardwareProfile table = profile_from_measurement(h200(), "sm_90", std::nullopt);
  EXPECT_DOUBLE_EQ(table.peak_gbps, 4800);
  EXPECT_DOUBLE_EQ(table.peak_gflops, 67000);
  EXPECT_EQ(table.target.str(), "cuda-sm90");
  HardwareProfile measured = profile_from_measurement(h200(), "sm_90", sample());
  EXPECT_DOUBLE_EQ(measured.peak_gflops, 65123.4);
  EXPECT_DOUBLE_EQ(measured.peak_gflops_f64, 32100.0);
  EXPECT_DOUBLE_EQ(measured.peak_gbps, 4310.2);
  EXPECT_EQ(measured.cores, 132);
  EXPECT_EQ(measured.target.str(), "cuda-sm90");
  EXPECT_EQ(measured.bandwidth.size(), 2u);
  // The roofline reads the measured curve: an L2-sized working set sees the L2 figure.
  EXPECT_NEAR(measured.gbps_for_working_set(4u << 20), 9000.5, 1e-6);
}

TEST(CudaGuide, ShowsTheMeasuredFiguresAndTheAbi) {
  HardwareGuide g;
  g.backend = "cuda";
  g.arch = "sm_90";
  g.toolkit = "nvcc release 13.0, V13.0.88";
  describe_measurement(g, sample(), gpu_profile(h200(), "sm_90"), "");
  std::string text = device_section(HardwareProfile{}, g);
  for (const char* want : {"NVIDIA H200", "compute capability 9.0", "sm_90", "132 SMs", "FP32 FMA 65.1 TFLOP/s", "TF32 tensor cores 370.0 TFLOP/s",
                           "4310 GB/s", "measured on this GPU by kope's probe", "cudaFuncSetAttribute", "no cudaMalloc", "cuBLAS"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  }
  for (const auto& line : util::split(text, '\n')) {
    if (!line.empty()) {
      EXPECT_TRUE(line.starts_with("- ")) << line;
    }
  }
  HardwareGuide t;
  t.arch = "sm_90";
  t.device_name = "NVIDIA H200";
  describe_measurement(t, std::nullopt, gpu_profile(h200(), "sm_90"), "no CUDA device");
  std::string fallback = device_section(HardwareProfile{}, t);
  EXPECT_NE(fallback.find("kope's table of known GPUs (the probe did not run: no CUDA device)"), std::string::npos) << fallback;
  EXPECT_NE(fallback.find("FP32 FMA 67.0 TFLOP/s"), std::string::npos) << fallback;
}

// Every suite op's GPU baseline: named by a library kope knows, reporting itself as that
// library, and taking the op's library baseline's place on the CUDA backend.
TEST(GpuBaselines, EachOpsBaselineIsLabelledAndSelected) {
  auto ops = spec::select_ops({"all"}, fs::path(KOPE_SOURCE_DIR) / "ops");
  ASSERT_TRUE(ops) << ops.error().message;
  const std::map<std::string, std::string> describe = {
      {"cublas", "describe_cublas("}, {"cublaslt", "describe_cublaslt("}, {"cudnn", "describe_cudnn("}, {"cuda-naive", "describe_naive("}};
  int with = 0;
  for (const auto& op : *ops) {
    spec::OpSpec as_cuda = with_gpu_baseline(op);
    if (!op.gpu_library_path) {
      EXPECT_FALSE(as_cuda.library_path) << op.name << ": a CPU library is no baseline on the GPU";
      EXPECT_EQ(as_cuda.library_name, "") << op.name;
      continue;
    }
    ++with;
    ASSERT_TRUE(describe.contains(op.gpu_library_name)) << op.name << " names library '" << op.gpu_library_name << "'";
    EXPECT_EQ(as_cuda.library_path, op.gpu_library_path) << op.name;
    EXPECT_EQ(as_cuda.library_name, op.gpu_library_name) << op.name;
    auto src = util::read_file(*op.gpu_library_path);
    ASSERT_TRUE(src);
    EXPECT_NE(src->find(describe.at(op.gpu_library_name)), std::string::npos) << op.name << " must report itself as " << op.gpu_library_name;
    EXPECT_NE(src->find("kope_host_describe"), std::string::npos) << op.name;
    EXPECT_NE(src->find("extern \"C\" void kope_kernel("), std::string::npos) << op.name;
    // FP32 GEMMs and convolutions stay FP32: no TF32 tensor-op math.
    EXPECT_EQ(src->find("TF32_TENSOR_OP"), std::string::npos) << op.name;
    EXPECT_EQ(src->find("COMPUTE_32F_FAST"), std::string::npos) << op.name;
  }
  EXPECT_GE(with, 30);
  // The matmul-class ops use cuBLAS, the fused matmuls cuBLASLt, convolutions cuDNN.
  for (const auto& [name, lib] : std::map<std::string, std::string>{{"sgemm", "cublas"},
                                                                    {"batched_matmul", "cublas"},
                                                                    {"matmul_bias_relu", "cublaslt"},
                                                                    {"conv2d_3x3", "cudnn"},
                                                                    {"softmax", "cudnn"},
                                                                    {"layernorm", "cuda-naive"}}) {
    auto it = std::find_if(ops->begin(), ops->end(), [&](const spec::OpSpec& o) { return o.name == name; });
    ASSERT_NE(it, ops->end()) << name;
    EXPECT_EQ(it->gpu_library_name, lib) << name;
  }
}

TEST(GpuBaselines, LibraryReportIsParsed) {
  LibraryConfig c = parse_library_report("cublas version=13.1.0 config=sgemm,fp32,tf32=off,device=NVIDIA_H200;", "cublas", "environment", {}, 8);
  EXPECT_EQ(c.library, "cublas");
  EXPECT_EQ(c.version, "13.1.0");
  EXPECT_EQ(c.core, "sgemm,fp32,tf32=off,device=NVIDIA_H200");
  EXPECT_FALSE(c.forced);  // no thread count, no variables
  EXPECT_EQ(c.describe(), "cuBLAS 13.1.0 config sgemm,fp32,tf32=off,device=NVIDIA_H200");
  LibraryConfig n = parse_library_report("cuda-naive version=13.0.0 config=elementwise,grid_stride,fp32,device=NVIDIA_H200;", "cuda-naive",
                                         "environment", {}, 8);
  EXPECT_EQ(n.describe(), "cuda-naive (kope) 13.0.0 config elementwise,grid_stride,fp32,device=NVIDIA_H200");
  EXPECT_TRUE(library_env_vars("cudnn").empty());  // nothing for --library-config best to choose
}

// The backends' side of the seam: the CUDA backend runs the op's GPU baseline in a trusted
// host-shim runner on the device clock, FP32 kept; the CPU backend keeps the op's library.cpp.
TEST(GpuBaselines, BackendsChooseTheirDevicesBaseline) {
  HardwareProfile hw;
  hw.target = *Target::parse("x86_64");
  hw.cores = 2;
  hw.memory_bytes = 8ull << 30;
  auto sgemm = spec::resolve_op("sgemm", fs::path(KOPE_SOURCE_DIR) / "ops");
  ASSERT_TRUE(sgemm) << sgemm.error().message;
  auto cpu = make_backend("cpu", hw, {});
  if (!cpu) GTEST_SKIP() << cpu.error().message;
  spec::OpSpec as_cpu = (*cpu)->baseline_op(*sgemm);
  EXPECT_EQ(as_cpu.library_name, "openblas");
  EXPECT_EQ(as_cpu.library_path, sgemm->library_path);
  EXPECT_FALSE((*cpu)->library_device_clock());
  EXPECT_EQ((*cpu)->library_runner_options(1 << 20).mode, proto::Mode::trusted);
  EXPECT_FALSE((*cpu)->library_runner_options(1 << 20).host_shim);
  auto gpu = make_backend("cuda", hw, {});
  if (!gpu) GTEST_SKIP() << gpu.error().message;
  spec::OpSpec as_gpu = (*gpu)->baseline_op(*sgemm);
  EXPECT_EQ(as_gpu.library_name, "cublas");
  EXPECT_EQ(as_gpu.library_path, sgemm->gpu_library_path);
  EXPECT_TRUE((*gpu)->library_device_clock());
  RunnerOptions ro = (*gpu)->library_runner_options(1 << 20);
  EXPECT_EQ(ro.mode, proto::Mode::trusted);
  EXPECT_TRUE(ro.host_shim);
  EXPECT_TRUE(ro.device_ioctl);
  EXPECT_NE(std::find(ro.env.begin(), ro.env.end(), std::pair<std::string, std::string>{"NVIDIA_TF32_OVERRIDE", "0"}), ro.env.end());
  // The reference stays the CPU's, in an ordinary trusted runner.
  EXPECT_FALSE((*gpu)->runner_options(proto::Mode::trusted, 1 << 20).host_shim);
  // The baseline's build: the candidates' nvcc flags, the same shim, the vendor libraries.
  const Toolkit& tk = toolkit();
  if (!tk.problem.empty()) GTEST_SKIP() << tk.problem;
  std::string script = trusted_build_script(tk, nvcc_flags(tk.arch), "gpu_library.cu");
  for (const auto& f : nvcc_flags(tk.arch)) EXPECT_NE(script.find(f), std::string::npos) << f << "\n" << script;
  for (const char* want : {"kope_host.cu", "-Dkope_entry=kope_device_entry", "-lcublasLt", "-lcublas", "-lcudnn", "--as-needed", "wait $p1"}) {
    EXPECT_NE(script.find(want), std::string::npos) << want << "\n" << script;
  }
}

}  // namespace
}  // namespace kope::eval::cuda

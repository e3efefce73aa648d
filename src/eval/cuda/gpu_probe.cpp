// The GPU roofline probe: compiled with nvcc, run once per GPU, cached; kope's table of known
// GPUs where it cannot run.
#include "eval/cuda/gpu_probe.h"

#include <mutex>

#include <nlohmann/json.hpp>

#include "eval/cuda/cuda.h"
#include "util/fs.h"
#include "util/file_lock.h"
#include "util/strings.h"
#include "util/subprocess.h"
#include "util/time.h"

namespace kope::eval::cuda {

namespace {

using json = nlohmann::json;

constexpr const char* k_probe_source =
#include "eval/cuda/gpu_probe.inc"
    ;

json bandwidth_json(const std::vector<BandwidthPoint>& bw) {
  json a = json::array();
  for (const auto& pt : bw) a.push_back({{"working_set_bytes", pt.working_set_bytes}, {"gbps", pt.gbps}});
  return a;
}

std::vector<BandwidthPoint> bandwidth_from(const json& a) {
  std::vector<BandwidthPoint> out;
  for (const auto& pt : a) out.push_back({pt.at("working_set_bytes").get<uint64_t>(), pt.at("gbps").get<double>()});
  std::sort(out.begin(), out.end(), [](const BandwidthPoint& x, const BandwidthPoint& y) { return x.working_set_bytes < y.working_set_bytes; });
  return out;
}

GpuMeasurement measurement_from(const json& j) {
  GpuMeasurement m;
  m.name = j.at("name").get<std::string>();
  m.compute_cap = j.at("compute_cap").get<std::string>();
  m.sms = j.at("sms").get<int>();
  m.clock_mhz = j.value("clock_mhz", 0);
  m.memory_clock_mhz = j.value("memory_clock_mhz", 0);
  m.bus_bits = j.value("bus_bits", 0);
  m.memory_bytes = j.value("memory_bytes", uint64_t{0});
  m.l2_bytes = j.value("l2_bytes", uint64_t{0});
  m.shared_per_block_optin = j.value("shared_per_block_optin", uint64_t{0});
  m.shared_per_sm = j.value("shared_per_sm", uint64_t{0});
  m.regs_per_sm = j.value("regs_per_sm", 0);
  m.max_threads_per_sm = j.value("max_threads_per_sm", 0);
  m.fp32_gflops = j.at("fp32_gflops").get<double>();
  m.fp64_gflops = j.value("fp64_gflops", 0.0);
  m.tf32_gflops = j.value("tf32_gflops", 0.0);
  m.fp16_gflops = j.value("fp16_gflops", 0.0);
  m.bandwidth = bandwidth_from(j.at("bandwidth"));
  m.nvcc = j.value("nvcc", "");
  m.measured_at = j.value("measured_at", "");
  m.probe_version = j.value("probe_version", 0);
  return m;
}

json measurement_json(const GpuMeasurement& m) {
  return {{"name", m.name},
          {"compute_cap", m.compute_cap},
          {"sms", m.sms},
          {"clock_mhz", m.clock_mhz},
          {"memory_clock_mhz", m.memory_clock_mhz},
          {"bus_bits", m.bus_bits},
          {"memory_bytes", m.memory_bytes},
          {"l2_bytes", m.l2_bytes},
          {"shared_per_block_optin", m.shared_per_block_optin},
          {"shared_per_sm", m.shared_per_sm},
          {"regs_per_sm", m.regs_per_sm},
          {"max_threads_per_sm", m.max_threads_per_sm},
          {"fp32_gflops", m.fp32_gflops},
          {"fp64_gflops", m.fp64_gflops},
          {"tf32_gflops", m.tf32_gflops},
          {"fp16_gflops", m.fp16_gflops},
          {"bandwidth", bandwidth_json(m.bandwidth)},
          {"nvcc", m.nvcc},
          {"measured_at", m.measured_at},
          {"probe_version", m.probe_version}};
}

// Whether a cached entry describes this GPU as the current probe would measure it.
bool matches(const GpuMeasurement& m, const Gpu& gpu) {
  if (m.probe_version != k_gpu_probe_version || m.name != gpu.name || m.compute_cap != gpu.compute_cap) return false;
  // nvidia-smi reports MiB; the runtime bytes: equal within 1%.
  if (gpu.memory_bytes > 0 && m.memory_bytes > 0) {
    double r = static_cast<double>(m.memory_bytes) / static_cast<double>(gpu.memory_bytes);
    if (r < 0.99 || r > 1.01) return false;
  }
  return m.fp32_gflops > 0 && !m.bandwidth.empty();
}

}  // namespace

double GpuMeasurement::hbm_gbps() const { return bandwidth.empty() ? 0.0 : bandwidth.back().gbps; }

std::string GpuMeasurement::to_json() const { return measurement_json(*this).dump(2); }

Result<GpuMeasurement> GpuMeasurement::from_json(std::string_view text) {
  try {
    return measurement_from(json::parse(text));
  } catch (const json::exception& e) {
    return fail(ErrorKind::corrupt, "the GPU measurement is unreadable: {}", e.what());
  }
}

Result<GpuMeasurement> parse_probe_output(std::string_view out) {
  auto start = out.find('{');
  if (start == std::string_view::npos) return fail(ErrorKind::internal, "the GPU probe printed no result: {}", util::truncate_text(out, 400, 4));
  KOPE_ASSIGN(GpuMeasurement m, GpuMeasurement::from_json(out.substr(start)));
  if (!(m.fp32_gflops > 0) || m.bandwidth.empty() || m.sms <= 0) {
    return fail(ErrorKind::internal, "the GPU probe's figures are not usable (FP32 {} GFLOP/s, {} bandwidth points, {} SMs)", m.fp32_gflops,
                m.bandwidth.size(), m.sms);
  }
  return m;
}

std::string_view gpu_probe_source() { return k_probe_source; }

Result<fs::path> build_gpu_probe(const Toolkit& tk, const fs::path& dir) {
  if (!tk.problem.empty()) return fail(ErrorKind::unavailable, "the GPU probe cannot be built: {}", tk.problem);
  fs::path src = dir / "probe.cu", exe = dir / "probe";
  KOPE_TRY(util::write_file_atomic(src, k_probe_source));
  util::RunOptions cc;
  cc.spawn.argv = {tk.nvcc->string(), "-O3", "-std=c++17", "-arch=" + tk.arch, src.string(), "-o", exe.string()};
  cc.timeout = std::chrono::seconds(300);
  KOPE_ASSIGN(util::RunResult built, util::run(cc));
  if (!built.status.success()) {
    return fail(ErrorKind::internal, "the GPU probe does not compile: {}\n{}", built.status.describe(), util::truncate_text(built.err, 2000, 20));
  }
  return exe;
}

Result<GpuMeasurement> run_gpu_probe(const Toolkit& tk) {
  KOPE_ASSIGN(util::TempDir dir, util::TempDir::create("kope-gpu-probe-"));
  KOPE_ASSIGN(fs::path exe, build_gpu_probe(tk, dir.path()));
  // Measuring is timing: never beside an evaluator's timing (or another probe).
  KOPE_ASSIGN(util::SharedLock lock, util::lock_for_timing());
  util::RunOptions ro;
  ro.spawn.argv = {exe.string()};
  ro.timeout = std::chrono::seconds(120);
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (!r.status.success()) {
    return fail(ErrorKind::unavailable, "the GPU probe failed ({}): {}", r.status.describe(), util::truncate_text(r.err, 1000, 10));
  }
  KOPE_ASSIGN(GpuMeasurement m, parse_probe_output(r.out));
  m.nvcc = tk.nvcc_version;
  m.measured_at = util::now_iso8601(util::TimePrecision::seconds);
  m.probe_version = k_gpu_probe_version;
  return m;
}

Result<GpuMeasurement> load_gpu_measurement(const fs::path& cache, const Gpu& gpu, bool refresh,
                                            const std::function<Result<GpuMeasurement>()>& measure) {
  json entries = json::array();
  if (auto text = util::read_file(cache)) {
    try {
      json j = json::parse(*text);
      if (j.contains("gpus") && j.at("gpus").is_array()) entries = j.at("gpus");
    } catch (const json::exception&) {
      // A damaged cache is measured again and rewritten.
    }
  }
  json kept = json::array();
  for (const auto& e : entries) {
    try {
      GpuMeasurement m = measurement_from(e);
      if (!refresh && matches(m, gpu)) return m;
      if (m.name != gpu.name) kept.push_back(e);  // other GPUs' entries stay
    } catch (const json::exception&) {
      // An unreadable entry is dropped.
    }
  }
  KOPE_ASSIGN(GpuMeasurement m, measure());
  kept.push_back(measurement_json(m));
  KOPE_TRY(util::make_dirs(cache.parent_path()));
  KOPE_TRY(util::write_file_atomic(cache, json{{"gpus", kept}}.dump(2)));
  return m;
}

HardwareProfile gpu_profile(const Gpu& gpu, const std::string& arch) {
  HardwareProfile p;
  p.target = *Target::parse("cuda-" + util::replace_all(arch, "_", ""));
  p.cpu_model = gpu.name;
  p.cores = 1;
  p.memory_bytes = gpu.memory_bytes;
  // FP32 (non-tensor) peak and HBM bandwidth of the parts kope knows; others get a generous
  // default so the floor never rejects an honest kernel.
  struct Known {
    const char* name;
    double gflops, gbps;
  };
  static const Known k_known[] = {{"H200", 67000, 4800}, {"H100", 67000, 3350}, {"A100", 19500, 2039},
                                  {"L40S", 91600, 864},  {"L4", 30300, 300},    {"RTX 4090", 82600, 1008}};
  p.peak_gflops = 200000;
  p.peak_gbps = 10000;
  for (const auto& k : k_known) {
    if (gpu.name.find(k.name) != std::string::npos) {
      p.peak_gflops = k.gflops;
      p.peak_gbps = k.gbps;
      break;
    }
  }
  p.peak_gflops_core = p.peak_gflops;
  // On-chip caches are much faster than HBM: the floor assumes 4x the bandwidth for any
  // working set (a deliberately low floor).
  p.bandwidth = {{uint64_t{1} << 40, p.peak_gbps * 4}};
  p.compiler = "nvcc " + toolkit().nvcc_version;
  return p;
}

HardwareProfile profile_from_measurement(const Gpu& gpu, const std::string& arch, const std::optional<GpuMeasurement>& m) {
  HardwareProfile p = gpu_profile(gpu, arch);
  if (!m) return p;
  p.cpu_model = m->name;
  p.cores = m->sms;  // streaming multiprocessors
  p.memory_bytes = m->memory_bytes;
  p.l2_bytes = m->l2_bytes;
  p.peak_gflops = m->fp32_gflops;
  p.peak_gflops_core = m->fp32_gflops / std::max(1, m->sms);
  p.peak_gflops_f64 = m->fp64_gflops;
  p.peak_gflops_f64_core = m->fp64_gflops / std::max(1, m->sms);
  p.peak_gbps = m->hbm_gbps();
  p.bandwidth = m->bandwidth;
  p.compiler = "nvcc " + m->nvcc;
  p.measured_at = m->measured_at;
  p.probe_version = m->probe_version;
  return p;
}

const std::optional<GpuMeasurement>& device_measurement(std::string* why) {
  static std::once_flag once;
  static std::optional<GpuMeasurement> m;
  static std::string problem;
  std::call_once(once, [] {
    const Toolkit& tk = toolkit();
    if (tk.gpus.empty()) {
      problem = "no GPU";
      return;
    }
    auto r = load_gpu_measurement(util::cache_dir() / "gpu-hw.json", tk.gpus.front(), false, [&tk] { return run_gpu_probe(tk); });
    if (r) {
      m = *r;
    } else {
      problem = r.error().message;
    }
  });
  if (why != nullptr) *why = problem;
  return m;
}

}  // namespace kope::eval::cuda

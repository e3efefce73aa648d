// kope-opencl-host: the trusted host program that runs an OpenCL candidate inside kope-runner.
//
// The runner loads this object (--host DIR) before any seccomp filter and calls
// kope_host_prepare(DIR), which sets up PoCL (its worker threads exist from then on), loads the
// candidate's two program binaries built by kope-oclc (DIR/program_small.bin and
// program_large.bin: the work-group function already compiled for the candidate's local size,
// for grids narrower than PoCL's 65535-wide specialisation limit and for the rest) and reads
// the launch table DIR/launch.txt written by the evaluator. PoCL then only maps the compiled
// code at the first launch; it never compiles inside the runner. Each kope_entry call wraps the
// runner's tensors as zero-copy buffers (CL_MEM_USE_HOST_PTR: the kernel reads and writes the runner's guarded views, so guard
// pages and read-only inputs apply to it exactly as to a CPU kernel), sets the arguments
// (inputs, outputs, dims as long, attrs), launches one NDRange and waits for it. The parent's
// clock around the runner's batches times it. An OpenCL error is reported on stderr and ends
// the process with SIGABRT (the parent names the last stderr line). Links libc and libOpenCL.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct CaseGeometry {
  std::vector<int64_t> dims;
  size_t global[3] = {1, 1, 1};
};

struct Attr {
  char dtype[8] = {};
  double value = 0;
  int64_t ivalue = 0;
};

struct Buffer {
  void* ptr = nullptr;
  cl_mem mem = nullptr;
};

cl_context g_context = nullptr;
cl_command_queue g_queue = nullptr;
// PoCL's grid_width_specialization_limit for CPU devices (USHRT_MAX): launches whose widest
// dimension is narrower use the "smallgrid" work-group function.
constexpr size_t k_small_grid_limit = 65535;
cl_kernel g_kernel_small = nullptr;
cl_kernel g_kernel_large = nullptr;
uint32_t g_inputs = 0;
uint32_t g_outputs = 0;
uint32_t g_dims = 0;
uint32_t g_work_dim = 1;
size_t g_local[3] = {1, 1, 1};
std::vector<Attr> g_attrs;
std::vector<CaseGeometry> g_cases;
std::vector<uint64_t> g_bytes;  // per tensor (inputs then outputs) of the current case
std::vector<Buffer> g_buffers;  // cached per host pointer for the current case

[[noreturn]] void die(const char* what, cl_int code) {
  std::fprintf(stderr, "kope-opencl-host: %s failed with OpenCL error %d\n", what, static_cast<int>(code));
  std::abort();
}

bool read_all(const std::string& path, std::vector<unsigned char>* out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  unsigned char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out->insert(out->end(), buf, buf + n);
  std::fclose(f);
  return true;
}

// launch.txt, written by the evaluator (trusted): one directive per line.
bool read_launch(const std::string& path, char* why, size_t why_size) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return std::snprintf(why, why_size, "cannot open %s", path.c_str()), false;
  char line[4096];
  bool header = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    char key[32] = {};
    int used = 0;
    if (std::sscanf(line, "%31s%n", key, &used) != 1) continue;
    const char* rest = line + used;
    if (std::strcmp(key, "kope-opencl-launch") == 0) {
      header = std::atoi(rest) == 1;
    } else if (std::strcmp(key, "tensors") == 0) {
      std::sscanf(rest, "%u %u", &g_inputs, &g_outputs);
    } else if (std::strcmp(key, "dims") == 0) {
      std::sscanf(rest, "%u", &g_dims);
    } else if (std::strcmp(key, "local") == 0) {
      std::sscanf(rest, "%u %zu %zu %zu", &g_work_dim, &g_local[0], &g_local[1], &g_local[2]);
    } else if (std::strcmp(key, "attr") == 0) {
      Attr a;
      long long iv = 0;
      if (std::sscanf(rest, "%7s %la %lld", a.dtype, &a.value, &iv) != 3) break;
      a.ivalue = iv;
      g_attrs.push_back(a);
    } else if (std::strcmp(key, "case") == 0) {
      CaseGeometry c;
      const char* p = rest;
      for (uint32_t d = 0; d < g_dims; ++d) {
        char* end = nullptr;
        c.dims.push_back(std::strtoll(p, &end, 10));
        p = end;
      }
      for (size_t& g : c.global) {
        char* end = nullptr;
        g = std::strtoull(p, &end, 10);
        p = end;
      }
      g_cases.push_back(c);
    }
  }
  std::fclose(f);
  if (!header || g_work_dim < 1 || g_work_dim > 3 || g_inputs + g_outputs == 0) {
    return std::snprintf(why, why_size, "%s is malformed", path.c_str()), false;
  }
  return true;
}

const CaseGeometry* geometry_for(const int64_t* dims) {
  for (const auto& c : g_cases) {
    bool same = true;
    for (uint32_t d = 0; d < g_dims && same; ++d) same = c.dims[d] == dims[d];
    if (same) return &c;
  }
  return nullptr;
}

cl_mem buffer_for(void* ptr, uint64_t bytes, bool input) {
  for (const auto& b : g_buffers) {
    if (b.ptr == ptr) return b.mem;
  }
  cl_int err = CL_SUCCESS;
  cl_mem_flags flags = CL_MEM_USE_HOST_PTR | (input ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE);
  cl_mem m = clCreateBuffer(g_context, flags, bytes, ptr, &err);
  if (err != CL_SUCCESS) die("clCreateBuffer", err);
  g_buffers.push_back(Buffer{ptr, m});
  return m;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int kope_host_prepare(const char* dir, char* why, size_t why_size) {
  std::string d = dir;
  if (!read_launch(d + "/launch.txt", why, why_size)) return 1;
  cl_uint count = 0;
  cl_platform_id platform = nullptr;
  cl_int err = clGetPlatformIDs(1, &platform, &count);
  if (err != CL_SUCCESS || count == 0) return std::snprintf(why, why_size, "no OpenCL platform (error %d)", err), 1;
  cl_device_id device = nullptr;
  err = clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, 1, &device, &count);
  if (err != CL_SUCCESS || count == 0) return std::snprintf(why, why_size, "no OpenCL CPU device (error %d)", err), 1;
  g_context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return std::snprintf(why, why_size, "clCreateContext: error %d", err), 1;
  g_queue = clCreateCommandQueueWithProperties(g_context, device, nullptr, &err);
  if (err != CL_SUCCESS) return std::snprintf(why, why_size, "clCreateCommandQueue: error %d", err), 1;
  for (int variant = 0; variant < 2; ++variant) {
    std::string path = d + (variant == 0 ? "/program_small.bin" : "/program_large.bin");
    std::vector<unsigned char> binary;
    if (!read_all(path, &binary) || binary.empty()) return std::snprintf(why, why_size, "cannot read the program binary %s", path.c_str()), 1;
    size_t size = binary.size();
    const unsigned char* bytes = binary.data();
    cl_int status = CL_SUCCESS;
    cl_program program = clCreateProgramWithBinary(g_context, 1, &device, &size, &bytes, &status, &err);
    if (err != CL_SUCCESS || status != CL_SUCCESS) {
      return std::snprintf(why, why_size, "clCreateProgramWithBinary(%s): error %d/%d", path.c_str(), err, status), 1;
    }
    err = clBuildProgram(program, 1, &device, "", nullptr, nullptr);
    if (err != CL_SUCCESS) return std::snprintf(why, why_size, "clBuildProgram (from %s): error %d", path.c_str(), err), 1;
    cl_kernel k = clCreateKernel(program, "kope_kernel", &err);
    if (err != CL_SUCCESS) return std::snprintf(why, why_size, "clCreateKernel(kope_kernel): error %d", err), 1;
    (variant == 0 ? g_kernel_small : g_kernel_large) = k;
  }
  // Attributes follow the dims and never change.
  for (cl_kernel k : {g_kernel_small, g_kernel_large}) {
    cl_uint arg = g_inputs + g_outputs + g_dims;
    for (const auto& a : g_attrs) {
      if (std::strcmp(a.dtype, "f32") == 0) {
        auto v = static_cast<cl_float>(a.value);
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else if (std::strcmp(a.dtype, "f64") == 0) {
        cl_double v = a.value;
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else if (std::strcmp(a.dtype, "i32") == 0) {
        auto v = static_cast<cl_int>(a.ivalue);
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else if (std::strcmp(a.dtype, "i16") == 0) {
        auto v = static_cast<cl_short>(a.ivalue);
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else if (std::strcmp(a.dtype, "i8") == 0) {
        auto v = static_cast<cl_char>(a.ivalue);
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else if (std::strcmp(a.dtype, "u8") == 0 || std::strcmp(a.dtype, "bool") == 0) {
        auto v = static_cast<cl_uchar>(a.ivalue);
        err = clSetKernelArg(k, arg, sizeof v, &v);
      } else {
        cl_long v = a.ivalue;
        err = clSetKernelArg(k, arg, sizeof v, &v);
      }
      if (err != CL_SUCCESS) return std::snprintf(why, why_size, "clSetKernelArg(attr %u): error %d", arg, err), 1;
      ++arg;
    }
  }
  return 0;
}

__attribute__((visibility("default"))) void kope_host_map(const uint64_t* in_bytes, uint32_t inputs, const uint64_t* out_bytes,
                                                          uint32_t outputs) {
  for (const auto& b : g_buffers) clReleaseMemObject(b.mem);
  g_buffers.clear();
  g_bytes.assign(in_bytes, in_bytes + inputs);
  g_bytes.insert(g_bytes.end(), out_bytes, out_bytes + outputs);
}

__attribute__((visibility("default"))) void kope_entry(void* const* buffers, const int64_t* dims) {
  if (g_bytes.size() != g_inputs + g_outputs) {
    std::fprintf(stderr, "kope-opencl-host: %zu tensors mapped, the launch table expects %u\n", g_bytes.size(), g_inputs + g_outputs);
    std::abort();
  }
  const CaseGeometry* geo = geometry_for(dims);
  if (geo == nullptr) {
    std::fprintf(stderr, "kope-opencl-host: no launch geometry for these dims\n");
    std::abort();
  }
  size_t global[3];
  size_t widest = 0;
  for (uint32_t k = 0; k < g_work_dim; ++k) {
    // Rounded up to whole work-groups: the kernel checks its bounds (see ABI.md).
    global[k] = (geo->global[k] + g_local[k] - 1) / g_local[k] * g_local[k];
    if (global[k] == 0) return;  // nothing to launch
    if (global[k] > widest) widest = global[k];
  }
  cl_kernel kernel = widest < k_small_grid_limit ? g_kernel_small : g_kernel_large;
  cl_uint arg = 0;
  cl_int err = CL_SUCCESS;
  for (uint32_t t = 0; t < g_inputs + g_outputs; ++t, ++arg) {
    if (g_bytes[t] == 0) {
      err = clSetKernelArg(kernel, arg, sizeof(cl_mem), nullptr);
    } else {
      cl_mem m = buffer_for(buffers[t], g_bytes[t], t < g_inputs);
      err = clSetKernelArg(kernel, arg, sizeof m, &m);
    }
    if (err != CL_SUCCESS) die("clSetKernelArg (tensor)", err);
  }
  for (uint32_t d = 0; d < g_dims; ++d, ++arg) {
    cl_long v = dims[d];
    err = clSetKernelArg(kernel, arg, sizeof v, &v);
    if (err != CL_SUCCESS) die("clSetKernelArg (dim)", err);
  }
  err = clEnqueueNDRangeKernel(g_queue, kernel, g_work_dim, nullptr, global, g_local, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) die("clEnqueueNDRangeKernel", err);
  err = clFinish(g_queue);
  if (err != CL_SUCCESS) die("clFinish", err);
}

}  // extern "C"

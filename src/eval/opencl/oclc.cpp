// kope-oclc: builds one OpenCL candidate with the platform's compiler (PoCL), inside the compile
// sandbox, and never runs it.
//
//   kope-oclc build SOURCE OPTIONS BINARY ARGS   build SOURCE with OPTIONS; write the program
//                                                binary to BINARY and kope_kernel's arguments
//                                                to ARGS ("arg INDEX ADDRESS CONST TYPE NAME")
//   kope-oclc probe                              print the platform and device, one per line
//
// Exit codes: 0 built; 10 the program does not compile (build log on stderr); 11 it has no
// kope_kernel (the kernels it has on stderr); 2 usage; 3 no OpenCL platform or device.
// $POCL_BINARY_SPECIALIZE_WG (set by the evaluator) makes PoCL compile the work-group function
// for the candidate's local size into the binary, so the runner never compiles.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::string device_info(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  clGetDeviceInfo(d, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_info(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  clGetPlatformInfo(p, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

bool open_device(cl_platform_id* p, cl_device_id* d) {
  cl_uint n = 0;
  if (clGetPlatformIDs(1, p, &n) != CL_SUCCESS || n == 0) {
    std::fprintf(stderr, "no OpenCL platform is installed (is pocl-opencl-icd installed?)\n");
    return false;
  }
  if (clGetDeviceIDs(*p, CL_DEVICE_TYPE_CPU, 1, d, &n) != CL_SUCCESS || n == 0) {
    std::fprintf(stderr, "the OpenCL platform %s has no CPU device\n", platform_info(*p, CL_PLATFORM_NAME).c_str());
    return false;
  }
  return true;
}

int probe() {
  cl_platform_id p;
  cl_device_id d;
  if (!open_device(&p, &d)) return 3;
  size_t wg = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof wg, &wg, nullptr);
  cl_uint units = 0;
  clGetDeviceInfo(d, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
  cl_ulong local_mem = 0;
  clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, nullptr);
  size_t item_sizes[3] = {0, 0, 0};
  clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof item_sizes, item_sizes, nullptr);
  std::printf("platform %s\n", platform_info(p, CL_PLATFORM_NAME).c_str());
  std::printf("platform_version %s\n", platform_info(p, CL_PLATFORM_VERSION).c_str());
  std::printf("device %s\n", device_info(d, CL_DEVICE_NAME).c_str());
  std::printf("device_version %s\n", device_info(d, CL_DEVICE_VERSION).c_str());
  std::printf("driver_version %s\n", device_info(d, CL_DRIVER_VERSION).c_str());
  std::printf("max_work_group_size %zu\n", wg);
  std::printf("compute_units %u\n", units);
  std::printf("local_mem_size %llu\n", static_cast<unsigned long long>(local_mem));
  std::printf("max_work_item_sizes %zu %zu %zu\n", item_sizes[0], item_sizes[1], item_sizes[2]);
  std::printf("extensions %s\n", device_info(d, CL_DEVICE_EXTENSIONS).c_str());
  return 0;
}

int build(const char* source_path, const char* options, const char* binary_path, const char* args_path) {
  std::ifstream in(source_path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", source_path);
    return 2;
  }
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  cl_platform_id p;
  cl_device_id d;
  if (!open_device(&p, &d)) return 3;
  cl_int err = CL_SUCCESS;
  cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "clCreateContext: error %d\n", err);
    return 3;
  }
  const char* text = source.c_str();
  size_t length = source.size();
  cl_program prog = clCreateProgramWithSource(ctx, 1, &text, &length, &err);
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "clCreateProgramWithSource: error %d\n", err);
    return 10;
  }
  err = clBuildProgram(prog, 1, &d, options, nullptr, nullptr);
  size_t log_size = 0;
  clGetProgramBuildInfo(prog, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &log_size);
  std::string log(log_size, '\0');
  clGetProgramBuildInfo(prog, d, CL_PROGRAM_BUILD_LOG, log_size, log.data(), nullptr);
  while (!log.empty() && log.back() == '\0') log.pop_back();
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "%s\nclBuildProgram: error %d\n", log.c_str(), err);
    return 10;
  }
  if (!log.empty()) std::fprintf(stderr, "%s\n", log.c_str());
  cl_kernel k = clCreateKernel(prog, "kope_kernel", &err);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramInfo(prog, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n);
    std::string names(n, '\0');
    clGetProgramInfo(prog, CL_PROGRAM_KERNEL_NAMES, n, names.data(), nullptr);
    while (!names.empty() && names.back() == '\0') names.pop_back();
    std::fprintf(stderr, "the program defines no __kernel named kope_kernel (kernels: %s)\n", names.empty() ? "none" : names.c_str());
    return 11;
  }
  cl_uint nargs = 0;
  clGetKernelInfo(k, CL_KERNEL_NUM_ARGS, sizeof nargs, &nargs, nullptr);
  std::ofstream args(args_path);
  for (cl_uint i = 0; i < nargs; ++i) {
    cl_kernel_arg_address_qualifier aq = 0;
    cl_kernel_arg_type_qualifier tq = 0;
    clGetKernelArgInfo(k, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof aq, &aq, nullptr);
    clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof tq, &tq, nullptr);
    char type[256] = {}, name[256] = {};
    clGetKernelArgInfo(k, i, CL_KERNEL_ARG_TYPE_NAME, sizeof type - 1, type, nullptr);
    clGetKernelArgInfo(k, i, CL_KERNEL_ARG_NAME, sizeof name - 1, name, nullptr);
    const char* space = aq == CL_KERNEL_ARG_ADDRESS_GLOBAL     ? "global"
                        : aq == CL_KERNEL_ARG_ADDRESS_CONSTANT ? "constant"
                        : aq == CL_KERNEL_ARG_ADDRESS_LOCAL    ? "local"
                                                               : "private";
    for (char* c = type; *c != '\0'; ++c) {
      if (*c == ' ') *c = '_';
    }
    std::string arg_name = name[0] != '\0' ? name : "?";
    args << "arg " << i << ' ' << space << ' ' << ((tq & CL_KERNEL_ARG_TYPE_CONST) != 0 ? "const" : "mutable") << ' ' << type
         << ' ' << arg_name << '\n';
  }
  args.close();
  size_t bin_size = 0;
  err = clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof bin_size, &bin_size, nullptr);
  if (err != CL_SUCCESS || bin_size == 0) {
    std::fprintf(stderr, "clGetProgramInfo(CL_PROGRAM_BINARY_SIZES): error %d\n", err);
    return 10;
  }
  std::vector<unsigned char> bin(bin_size);
  unsigned char* ptr = bin.data();
  err = clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr);
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "clGetProgramInfo(CL_PROGRAM_BINARIES): error %d (the work-group function did not compile)\n", err);
    return 10;
  }
  std::ofstream out(binary_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(bin.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", binary_path);
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "probe") == 0) return probe();
  if (argc == 6 && std::strcmp(argv[1], "build") == 0) return build(argv[2], argv[3], argv[4], argv[5]);
  std::fprintf(stderr, "usage: kope-oclc build SOURCE OPTIONS BINARY ARGS | kope-oclc probe\n");
  return 2;
}

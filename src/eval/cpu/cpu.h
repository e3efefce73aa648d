// eval/cpu/cpu.h — the CPU C++ backend's entries in the backend table (eval/registry.h).
//
// The backend itself is made by make_cpu_backend (eval/backend.h): g++ in the compile sandbox
// (eval/cpu/compile.h), ELF inspection, kope-runner with seccomp. Thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "eval/registry.h"
#include "kope/eval.h"
#include "kope/hw.h"

namespace kope::eval {

// A CPU candidate's source file is kernel.cpp.
inline constexpr std::string_view k_cpu_file_extension = ".cpp";

// What the CPU backend finds here: the C++ compiler, the sandbox, the runner.
BackendInfo cpu_backend_info(const HardwareProfile& hw);

// The CPU toolchain's facts for the prompt: the ISA extensions its flags enable, the CPU they
// tune for.
void describe_cpu_device(HardwareGuide& guide);

// The prompt's lines on the ISA the compile flags enable (the profile's target features when
// the guide knows none) and the cores the kernel gets.
std::string cpu_device_section(const HardwareProfile& hw, const HardwareGuide& guide);
// Its parts, for backends whose kernels also run on the host CPU (OpenCL on PoCL): the "- CPU:"
// line, and the caches, peaks, triad curve and roofline rule of a CPU profile.
std::string cpu_identity_line(const HardwareProfile& hw, const HardwareGuide& guide);
std::string cpu_memory_lines(const HardwareProfile& hw);

}  // namespace kope::eval

// kope/target.h — the hardware target value type (after Halide's Target).
//
// A target names a kind of hardware and the features kernels may use, as a string that
// round-trips: parse(t.str()) == t. Examples: "x86_64-avx2-fma", "cuda-sm90",
// "opencl-pocl-cpu", "ascend-910c". Memory records are keyed by this string, so experience
// from one target is never mistaken for another's.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kope/error.h"

namespace kope {

struct Target {
  std::string arch;                   // "x86_64", "aarch64", "cuda", "opencl", "ascend"
  std::vector<std::string> features;  // canonical order (see str())

  // Parses "arch-feature-feature"; fails on an empty string, empty parts or characters other
  // than [a-z0-9_.].
  static Result<Target> parse(std::string_view text);
  // The host CPU (cpuid) at the ISA level of $KOPE_ISA (hw/isa.h: host_cpu_target() is the CPU's own).
  static Target host();

  // Canonical text: arch, then known features in a fixed order, then unknown ones sorted.
  std::string str() const;
  bool has(std::string_view feature) const;
  bool operator==(const Target& other) const { return str() == other.str(); }
  // The backend family a target belongs to: "cpu" for CPU architectures, else arch.
  std::string family() const;
};

}  // namespace kope

// util/system.h — facts of this process's machine that several parts ask for.
#pragma once

#include <cstdint>

namespace kope::util {

// A random 64-bit seed from the kernel's generator (getrandom), or from the clock and the pid
// where that fails. Thread-safe.
uint64_t random_seed();

// The machine's physical memory in bytes; 0 where the system does not say.
uint64_t physical_memory_bytes();

}  // namespace kope::util

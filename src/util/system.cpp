#include "util/system.h"

#include <sys/random.h>
#include <unistd.h>

#include <chrono>

namespace kope::util {

uint64_t random_seed() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != sizeof v) {
    v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^ static_cast<uint64_t>(::getpid());
  }
  return v;
}

uint64_t physical_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace kope::util

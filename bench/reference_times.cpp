// kope_reference_times: times each op's reference (and library baseline) on its timed cases,
// in-process, best of 3 calls after one warm-up, and prints buffer sizes. Used to size suite
// cases (a reference run of one timed case should take at most about 2 s on 2 cores).
//
//   build/bench/kope_reference_times [selector...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "eval/native.h"
#include "kope/spec.h"
#include "spec/generate.h"
#include "util/strings.h"

using namespace kope;

namespace {

double time_best(const eval::NativeKernel& k, const spec::OpSpec& op, const spec::Case& c, std::vector<void*>& bufs) {
  std::vector<int64_t> args = op.call_args(c);
  spec::copy_inouts(op, c, bufs.data());
  k.call(bufs.data(), args.data());
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    spec::copy_inouts(op, c, bufs.data());
    k.call(bufs.data(), args.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> sel(argv + 1, argv + argc);
  auto ops = spec::select_ops(sel);
  if (!ops) {
    std::fprintf(stderr, "%s\n", ops.error().message.c_str());
    return 2;
  }
  auto tc = eval::cpu_toolchain();
  if (!tc) {
    std::fprintf(stderr, "%s\n", tc.error().message.c_str());
    return 2;
  }
  std::printf("%-26s %-36s %10s %12s %12s\n", "op", "timed case", "buffers", "reference_s", "library_s");
  int rc = 0;
  for (const auto& op : *ops) {
    auto ref_so = eval::build_trusted(op, op.reference_path, *tc);
    if (!ref_so) {
      std::fprintf(stderr, "%s\n", ref_so.error().message.c_str());
      rc = 1;
      continue;
    }
    auto ref = eval::NativeKernel::load(*ref_so);
    std::optional<eval::NativeKernel> lib;
    if (op.library_path) {
      auto lib_so = eval::build_trusted(op, *op.library_path, *tc, eval::library_link_flags());
      if (!lib_so) {
        std::fprintf(stderr, "%s\n", lib_so.error().message.c_str());
        rc = 1;
      } else if (auto l = eval::NativeKernel::load(*lib_so)) {
        lib = std::move(*l);
      }
    }
    for (const auto* c : op.timed_cases()) {
      std::vector<void*> bufs;
      for (const auto* list : {&op.inputs, &op.outputs}) {
        for (const auto& t : *list) {
          size_t bytes = std::max<size_t>(64, (op.byte_size(t, *c) + 63) / 64 * 64);
          bufs.push_back(std::aligned_alloc(64, bytes));
          std::memset(bufs.back(), 0, bytes);
        }
      }
      spec::generate_inputs(op, *c, 1, bufs.data());
      double tr = time_best(*ref, op, *c, bufs);
      double tl = lib ? time_best(*lib, op, *c, bufs) : -1;
      std::printf("%-26s %-36s %10s %12.4f %12s\n", op.name.c_str(), op.case_label(*c).c_str(),
                  util::human_bytes(static_cast<double>(op.case_buffer_bytes(*c))).c_str(), tr,
                  tl < 0 ? "-" : fmt::format("{:.4f}", tl).c_str());
      std::fflush(stdout);
      for (void* p : bufs) std::free(p);
    }
  }
  return rc;
}

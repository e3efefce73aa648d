// kope-library: onednn
// Global sum of a vector through oneDNN's reduction primitive (reduction_sum of N into 1).
// oneDNN rejects a reduction that reduces nothing, so for N = 1 a reorder copies the element. The
// primitive is created on the first call for a length and reused, so creation stays outside
// timed calls.
#include <cstdint>
#include <map>
#include <mutex>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

struct Prim {
  dnnl::memory::desc src_md;
  dnnl::memory::desc dst_md;
  dnnl::primitive prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t N) {
  static std::map<int64_t, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(N);
  if (it != cache.end()) return it->second;
  dnnl::memory::desc src_md({N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::memory::desc dst_md({1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::primitive prim;
  if (N == 1) {
    prim = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src_md, engine(), dst_md));
  } else {
    dnnl::reduction::desc d(dnnl::algorithm::reduction_sum, src_md, dst_md, 0.0f, 0.0f);
    prim = dnnl::reduction(dnnl::reduction::primitive_desc(d, engine()));
  }
  return cache.emplace(N, Prim{src_md, dst_md, prim}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  Prim& p = get(N);
  dnnl::stream s(engine());
  dnnl::memory src(p.src_md, engine(), const_cast<float*>(x));
  dnnl::memory dst(p.dst_md, engine(), y);
  // DNNL_ARG_SRC/DST equal DNNL_ARG_FROM/TO, so one argument map serves both primitives.
  p.prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  s.wait();
}

// kope-library: onednn
// Strided slice through oneDNN's reorder primitive: the source is described as an R x C view of
// x with strides (SR * ld, SC) starting at element (OR, OC), and reordered into the dense R x C
// output. The primitive is created on the first call for a shape and reused, so creation stays
// outside timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

struct Prim {
  dnnl::memory::desc src_md;
  dnnl::memory::desc dst_md;
  dnnl::reorder prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t R, int64_t C, int64_t SR, int64_t SC, int64_t OC) {
  static std::map<std::array<int64_t, 5>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::array<int64_t, 5> key{R, C, SR, SC, OC};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const int64_t ld = OC + C * SC;
  dnnl::memory::desc src_md({R, C}, dnnl::memory::data_type::f32, dnnl::memory::dims{SR * ld, SC});
  dnnl::memory::desc dst_md({R, C}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::reorder::primitive_desc pd(engine(), src_md, engine(), dst_md);
  return cache.emplace(key, Prim{src_md, dst_md, dnnl::reorder(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, float* y, int64_t R, int64_t C, int64_t SR, int64_t SC, int64_t OR,
                            int64_t OC) {
  Prim& p = get(R, C, SR, SC, OC);
  const int64_t ld = OC + C * SC;
  dnnl::stream s(engine());
  dnnl::memory src(p.src_md, engine(), const_cast<float*>(x + OR * ld + OC));
  dnnl::memory dst(p.dst_md, engine(), y);
  p.prim.execute(s, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  s.wait();
}

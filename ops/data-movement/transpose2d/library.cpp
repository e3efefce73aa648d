// kope-library: onednn
// 2-D transpose through oneDNN's reorder primitive: the M x N source in row-major (ab) layout is
// reordered into the same logical tensor stored column-major (ba), which is y = x^T row-major.
// The primitive is created on the first call for a shape and reused, so creation stays outside
// timed calls.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

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

Prim& get(int64_t M, int64_t N) {
  static std::map<std::pair<int64_t, int64_t>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({M, N});
  if (it != cache.end()) return it->second;
  dnnl::memory::desc src_md({M, N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::memory::desc dst_md({M, N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ba);
  dnnl::reorder::primitive_desc pd(engine(), src_md, engine(), dst_md);
  return cache.emplace(std::make_pair(M, N), Prim{src_md, dst_md, dnnl::reorder(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, float* y, int64_t M, int64_t N) {
  Prim& p = get(M, N);
  dnnl::stream s(engine());
  dnnl::memory src(p.src_md, engine(), const_cast<float*>(x));
  dnnl::memory dst(p.dst_md, engine(), y);
  p.prim.execute(s, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
  s.wait();
}

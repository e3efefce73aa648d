// kope-library: onednn
// Row sums through oneDNN's reduction primitive (reduction_sum of N x D into N x 1).
// oneDNN rejects a reduction that reduces nothing, so for D = 1 the same result comes from its
// eltwise primitive (eltwise_linear, y = 1 * x + 0). The primitive is created on the first call for a shape and reused,
// so creation stays outside timed calls.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

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

dnnl::primitive make(int64_t D, const dnnl::memory::desc& src_md, const dnnl::memory::desc& dst_md) {
  if (D == 1) {
    dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_linear, src_md, 1.0f, 0.0f);
    return dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(d, engine()));
  }
  dnnl::reduction::desc d(dnnl::algorithm::reduction_sum, src_md, dst_md, 0.0f, 0.0f);
  return dnnl::reduction(dnnl::reduction::primitive_desc(d, engine()));
}

Prim& get(int64_t N, int64_t D) {
  static std::map<std::pair<int64_t, int64_t>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({N, D});
  if (it != cache.end()) return it->second;
  dnnl::memory::desc src_md({N, D}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  dnnl::memory::desc dst_md({N, 1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  return cache.emplace(std::make_pair(N, D), Prim{src_md, dst_md, make(D, src_md, dst_md)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, float* y, int64_t N, int64_t D) {
  Prim& p = get(N, D);
  dnnl::stream s(engine());
  dnnl::memory src(p.src_md, engine(), const_cast<float*>(x));
  dnnl::memory dst(p.dst_md, engine(), y);
  p.prim.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  s.wait();
}

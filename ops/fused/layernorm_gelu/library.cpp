// kope-library: onednn
// Layer normalisation + exact GELU through two oneDNN primitives: layer_normalization (forward
// inference over the last axis, statistics computed, use_scale | use_shift for g and b) writes
// y, then an eltwise gelu_erf primitive runs on y in place. Primitives are created on the first
// call for a shape and reused, so creation stays outside timed calls.
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc md, param_md;
  dnnl::layer_normalization_forward norm;
  dnnl::eltwise_forward gelu;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t N, int64_t D, float eps) {
  static std::map<std::pair<int64_t, int64_t>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({N, D});
  if (it != cache.end()) return it->second;
  memory::desc md({N, D}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc param_md({D}, memory::data_type::f32, memory::format_tag::a);
  const auto inference = dnnl::prop_kind::forward_inference;
  dnnl::layer_normalization_forward::primitive_desc norm_pd(
      dnnl::layer_normalization_forward::desc(
          inference, md, eps,
          dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift),
      engine());
  dnnl::eltwise_forward::primitive_desc gelu_pd(
      dnnl::eltwise_forward::desc(inference, dnnl::algorithm::eltwise_gelu_erf, md, 0.0f, 0.0f),
      engine());
  Prim p{md, param_md, dnnl::layer_normalization_forward(norm_pd), dnnl::eltwise_forward(gelu_pd)};
  return cache.emplace(std::make_pair(N, D), std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* g, const float* b, float* y, int64_t N,
                            int64_t D, float eps) {
  Prim& p = get(N, D, eps);
  dnnl::stream s(engine());
  memory src(p.md, engine(), const_cast<float*>(x));
  memory scale(p.param_md, engine(), const_cast<float*>(g));
  memory shift(p.param_md, engine(), const_cast<float*>(b));
  memory dst(p.md, engine(), y);
  p.norm.execute(s, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_SCALE, scale},
                     {DNNL_ARG_SHIFT, shift},
                     {DNNL_ARG_DST, dst}});
  p.gelu.execute(s, {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}});
  s.wait();
}

// kope-library: onednn
// Batch normalisation (inference) through oneDNN's batch_normalization primitive with
// use_global_stats | use_scale | use_shift: the given running mean and variance, gamma and beta.
// The primitive is created on the first call for a shape and reused, so creation stays outside
// timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

struct Prim {
  dnnl::memory::desc md;
  dnnl::memory::desc param_md;
  dnnl::batch_normalization_forward prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t N, int64_t C, int64_t H, int64_t W, float eps) {
  static std::map<std::array<int64_t, 4>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::array<int64_t, 4> key{N, C, H, W};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  dnnl::memory::desc md({N, C, H, W}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::nchw);
  dnnl::memory::desc param_md({C}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::batch_normalization_forward::desc d(dnnl::prop_kind::forward_inference, md, eps,
                                            dnnl::normalization_flags::use_global_stats |
                                                dnnl::normalization_flags::use_scale |
                                                dnnl::normalization_flags::use_shift);
  dnnl::batch_normalization_forward::primitive_desc pd(d, engine());
  return cache.emplace(key, Prim{md, param_md, dnnl::batch_normalization_forward(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* mean, const float* var, const float* gamma,
                            const float* beta, float* y, int64_t N, int64_t C, int64_t H, int64_t W, float eps) {
  Prim& p = get(N, C, H, W, eps);
  dnnl::stream s(engine());
  dnnl::memory src(p.md, engine(), const_cast<float*>(x));
  dnnl::memory m_mean(p.param_md, engine(), const_cast<float*>(mean));
  dnnl::memory m_var(p.param_md, engine(), const_cast<float*>(var));
  dnnl::memory m_scale(p.param_md, engine(), const_cast<float*>(gamma));
  dnnl::memory m_shift(p.param_md, engine(), const_cast<float*>(beta));
  dnnl::memory dst(p.md, engine(), y);
  p.prim.execute(s, {{DNNL_ARG_SRC, src},
                     {DNNL_ARG_MEAN, m_mean},
                     {DNNL_ARG_VARIANCE, m_var},
                     {DNNL_ARG_SCALE, m_scale},
                     {DNNL_ARG_SHIFT, m_shift},
                     {DNNL_ARG_DST, dst}});
  s.wait();
}

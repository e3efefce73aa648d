// kope-library: onednn
// Mean squared error as a framework composes it from oneDNN primitives: binary_sub with an
// eltwise_square post-op writes (a - b)^2 into a scratch buffer, then reduction_mean reduces it
// to the scalar (for N = 1, where oneDNN rejects a reduction that reduces nothing, the binary
// writes the scalar directly). Primitives and the scratch buffer are created on the first call for a length and
// reused, so creation and allocation stay outside timed calls.
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

struct Prims {
  dnnl::memory::desc vec_md;
  dnnl::memory::desc scalar_md;
  dnnl::binary square_diff;
  dnnl::primitive mean;  // empty when N = 1
  std::vector<float> scratch;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prims& get(int64_t N) {
  static std::map<int64_t, Prims> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(N);
  if (it != cache.end()) return it->second;
  dnnl::memory::desc vec_md({N}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::memory::desc scalar_md({1}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_square, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::binary::desc sub_d(dnnl::algorithm::binary_sub, vec_md, vec_md, vec_md);
  dnnl::binary::primitive_desc sub_pd(sub_d, attr, engine());
  Prims p{vec_md, scalar_md, dnnl::binary(sub_pd), dnnl::primitive(), std::vector<float>(static_cast<size_t>(N))};
  if (N > 1) {
    dnnl::reduction::desc mean_d(dnnl::algorithm::reduction_mean, vec_md, scalar_md, 0.0f, 0.0f);
    p.mean = dnnl::reduction(dnnl::reduction::primitive_desc(mean_d, engine()));
  }
  return cache.emplace(N, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* a, const float* b, float* loss, int64_t N) {
  Prims& p = get(N);
  dnnl::stream s(engine());
  dnnl::memory m_a(p.vec_md, engine(), const_cast<float*>(a));
  dnnl::memory m_b(p.vec_md, engine(), const_cast<float*>(b));
  dnnl::memory m_loss(p.scalar_md, engine(), loss);
  if (N == 1) {
    p.square_diff.execute(s, {{DNNL_ARG_SRC_0, m_a}, {DNNL_ARG_SRC_1, m_b}, {DNNL_ARG_DST, m_loss}});
  } else {
    dnnl::memory m_sq(p.vec_md, engine(), p.scratch.data());
    p.square_diff.execute(s, {{DNNL_ARG_SRC_0, m_a}, {DNNL_ARG_SRC_1, m_b}, {DNNL_ARG_DST, m_sq}});
    p.mean.execute(s, {{DNNL_ARG_SRC, m_sq}, {DNNL_ARG_DST, m_loss}});
  }
  s.wait();
}

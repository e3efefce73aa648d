// kope-library: onednn
// Linear layer with SiLU through one oneDNN matmul primitive: bias fused by the primitive and
// SiLU as oneDNN's swish eltwise post-op (z·sigmoid(alpha·z), alpha = 1). Primitives are created
// on the first call for a shape and reused, so creation stays outside timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w_md, b_md, y_md;
  dnnl::matmul prim;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t M, int64_t N, int64_t K) {
  static std::map<std::array<int64_t, 3>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 3> key{M, N, K};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc x_md({M, K}, f32, tag::ab), w_md({K, N}, f32, tag::ab), b_md({1, N}, f32, tag::ab);
  memory::desc y_md({M, N}, f32, tag::ab);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::matmul::desc d(x_md, w_md, b_md, y_md);
  dnnl::matmul::primitive_desc pd(d, attr, engine());
  return cache.emplace(key, Prim{x_md, w_md, b_md, y_md, dnnl::matmul(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w, const float* b, float* y, int64_t M,
                            int64_t N, int64_t K) {
  Prim& p = get(M, N, K);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<float*>(x));
  memory wm(p.w_md, engine(), const_cast<float*>(w));
  memory bm(p.b_md, engine(), const_cast<float*>(b));
  memory ym(p.y_md, engine(), y);
  p.prim.execute(
      s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, ym}});
  s.wait();
}

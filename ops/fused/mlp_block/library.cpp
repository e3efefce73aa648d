// kope-library: onednn
// MLP block through two oneDNN matmul primitives: h = gelu_erf(x·w1 + b1) (bias fused, GELU as
// an eltwise post-op) into a scratch buffer, then y = h·w2 + b2. Primitives and the scratch
// buffer are created on the first call for a shape and reused, so creation stays outside timed
// calls (calls for one shape must not overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w1_md, b1_md, w2_md, b2_md, y_md;
  memory h;  // gelu(x·w1 + b1), M x F
  dnnl::matmul up, down;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t M, int64_t D, int64_t F) {
  static std::map<std::array<int64_t, 3>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 3> key{M, D, F};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc x_md({M, D}, f32, tag::ab), w1_md({D, F}, f32, tag::ab), b1_md({1, F}, f32, tag::ab);
  memory::desc h_md({M, F}, f32, tag::ab), w2_md({F, D}, f32, tag::ab), b2_md({1, D}, f32, tag::ab);
  memory::desc y_md({M, D}, f32, tag::ab);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::matmul::primitive_desc up_pd(dnnl::matmul::desc(x_md, w1_md, b1_md, h_md), attr, engine());
  dnnl::matmul::primitive_desc down_pd(dnnl::matmul::desc(h_md, w2_md, b2_md, y_md), engine());
  Prim p{x_md,
         w1_md,
         b1_md,
         w2_md,
         b2_md,
         y_md,
         memory(h_md, engine()),
         dnnl::matmul(up_pd),
         dnnl::matmul(down_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w1, const float* b1, const float* w2,
                            const float* b2, float* y, int64_t M, int64_t D, int64_t F) {
  Prim& p = get(M, D, F);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<float*>(x));
  memory w1m(p.w1_md, engine(), const_cast<float*>(w1));
  memory b1m(p.b1_md, engine(), const_cast<float*>(b1));
  memory w2m(p.w2_md, engine(), const_cast<float*>(w2));
  memory b2m(p.b2_md, engine(), const_cast<float*>(b2));
  memory ym(p.y_md, engine(), y);
  p.up.execute(
      s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, w1m}, {DNNL_ARG_BIAS, b1m}, {DNNL_ARG_DST, p.h}});
  p.down.execute(
      s, {{DNNL_ARG_SRC, p.h}, {DNNL_ARG_WEIGHTS, w2m}, {DNNL_ARG_BIAS, b2m}, {DNNL_ARG_DST, ym}});
  s.wait();
}

// kope-library: onednn
// Gated feed-forward block through three oneDNN matmul primitives: u = x·wu into a scratch
// buffer; h = silu(x·wg) ⊙ u (swish eltwise post-op, alpha = 1, then a binary_mul post-op by u)
// into a second one; y = h·wd. Primitives and scratch buffers are created on the first call for
// a shape and reused, so creation stays outside timed calls (calls for one shape must not
// overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w_up_md, wd_md, y_md;
  memory u, h;  // x·wu and the gated activations, M x F
  dnnl::matmul up, gate, down;
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
  memory::desc x_md({M, D}, f32, tag::ab), w_up_md({D, F}, f32, tag::ab);
  memory::desc h_md({M, F}, f32, tag::ab), wd_md({F, D}, f32, tag::ab), y_md({M, D}, f32, tag::ab);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  ops.append_binary(dnnl::algorithm::binary_mul, h_md);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::matmul::primitive_desc up_pd(dnnl::matmul::desc(x_md, w_up_md, h_md), engine());
  dnnl::matmul::primitive_desc gate_pd(dnnl::matmul::desc(x_md, w_up_md, h_md), attr, engine());
  dnnl::matmul::primitive_desc down_pd(dnnl::matmul::desc(h_md, wd_md, y_md), engine());
  Prim p{x_md,
         w_up_md,
         wd_md,
         y_md,
         memory(h_md, engine()),
         memory(h_md, engine()),
         dnnl::matmul(up_pd),
         dnnl::matmul(gate_pd),
         dnnl::matmul(down_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* wg, const float* wu, const float* wd,
                            float* y, int64_t M, int64_t D, int64_t F) {
  Prim& p = get(M, D, F);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<float*>(x));
  memory wgm(p.w_up_md, engine(), const_cast<float*>(wg));
  memory wum(p.w_up_md, engine(), const_cast<float*>(wu));
  memory wdm(p.wd_md, engine(), const_cast<float*>(wd));
  memory ym(p.y_md, engine(), y);
  p.up.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wum}, {DNNL_ARG_DST, p.u}});
  p.gate.execute(s, {{DNNL_ARG_SRC, xm},
                     {DNNL_ARG_WEIGHTS, wgm},
                     {DNNL_ARG_DST, p.h},
                     {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, p.u}});
  p.down.execute(s, {{DNNL_ARG_SRC, p.h}, {DNNL_ARG_WEIGHTS, wdm}, {DNNL_ARG_DST, ym}});
  s.wait();
}

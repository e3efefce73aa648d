// kope-library: onednn
// Three-layer MLP classifier through four oneDNN primitives: two matmuls with the bias fused
// and a ReLU eltwise post-op into scratch buffers, a third matmul with its bias into y, then
// logsoftmax_forward over the last axis of y in place. Primitives and scratch buffers are
// created on the first call for a shape and reused, so creation stays outside timed calls
// (calls for one shape must not overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w1_md, b1_md, w2_md, w3_md, b3_md, y_md;
  memory h1, h2;  // the hidden activations, M x F
  dnnl::matmul l1, l2, l3;
  dnnl::logsoftmax_forward logsoftmax;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t M, int64_t D, int64_t F, int64_t C) {
  static std::map<std::array<int64_t, 4>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 4> key{M, D, F, C};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc x_md({M, D}, f32, tag::ab), w1_md({D, F}, f32, tag::ab), b1_md({1, F}, f32, tag::ab);
  memory::desc h_md({M, F}, f32, tag::ab), w2_md({F, F}, f32, tag::ab);
  memory::desc w3_md({F, C}, f32, tag::ab), b3_md({1, C}, f32, tag::ab), y_md({M, C}, f32, tag::ab);
  dnnl::post_ops relu;
  relu.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr relu_attr;
  relu_attr.set_post_ops(relu);
  dnnl::matmul::primitive_desc l1_pd(dnnl::matmul::desc(x_md, w1_md, b1_md, h_md), relu_attr,
                                     engine());
  dnnl::matmul::primitive_desc l2_pd(dnnl::matmul::desc(h_md, w2_md, b1_md, h_md), relu_attr,
                                     engine());
  dnnl::matmul::primitive_desc l3_pd(dnnl::matmul::desc(h_md, w3_md, b3_md, y_md), engine());
  dnnl::logsoftmax_forward::primitive_desc ls_pd(
      dnnl::logsoftmax_forward::desc(dnnl::prop_kind::forward_inference, y_md, 1), engine());
  Prim p{x_md,
         w1_md,
         b1_md,
         w2_md,
         w3_md,
         b3_md,
         y_md,
         memory(h_md, engine()),
         memory(h_md, engine()),
         dnnl::matmul(l1_pd),
         dnnl::matmul(l2_pd),
         dnnl::matmul(l3_pd),
         dnnl::logsoftmax_forward(ls_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* w1, const float* b1, const float* w2,
                            const float* b2, const float* w3, const float* b3, float* y, int64_t M,
                            int64_t D, int64_t F, int64_t C) {
  Prim& p = get(M, D, F, C);
  dnnl::stream s(engine());
  const auto in = [](const memory::desc& md, const float* data) {
    return memory(md, engine(), const_cast<float*>(data));
  };
  memory ym(p.y_md, engine(), y);
  p.l1.execute(s, {{DNNL_ARG_SRC, in(p.x_md, x)},
                   {DNNL_ARG_WEIGHTS, in(p.w1_md, w1)},
                   {DNNL_ARG_BIAS, in(p.b1_md, b1)},
                   {DNNL_ARG_DST, p.h1}});
  p.l2.execute(s, {{DNNL_ARG_SRC, p.h1},
                   {DNNL_ARG_WEIGHTS, in(p.w2_md, w2)},
                   {DNNL_ARG_BIAS, in(p.b1_md, b2)},  // b2 has b1's shape (1 x F)
                   {DNNL_ARG_DST, p.h2}});
  p.l3.execute(s, {{DNNL_ARG_SRC, p.h2},
                   {DNNL_ARG_WEIGHTS, in(p.w3_md, w3)},
                   {DNNL_ARG_BIAS, in(p.b3_md, b3)},
                   {DNNL_ARG_DST, ym}});
  p.logsoftmax.execute(s, {{DNNL_ARG_SRC, ym}, {DNNL_ARG_DST, ym}});
  s.wait();
}

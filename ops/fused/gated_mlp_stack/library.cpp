// kope-library: onednn
// Stack of pre-LN gated feed-forward residual blocks as a composition of oneDNN primitives,
// four per layer and the same four for every layer (all layers have one shape): a
// layer_normalization (use_scale | use_shift) into a scratch buffer a; u = a·wu[l] into a second;
// h = silu(a·wg[l]) ⊙ u (swish post-op, alpha = 1, then binary_mul by u) into a third; and
// x_{l+1} = h·wd[l] + x_l (a binary_add post-op by the layer's input) into one of two ping-pong
// buffers, or into y for the last layer. Primitives and scratch buffers are created on the first
// call for a shape and reused, so creation stays outside timed calls (calls for one shape must
// not overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, d_md, w_in_md, wd_md;
  memory a, u, h;        // LN(x_l), a·wu[l], the gated activations
  memory stream_mem[2];  // x_l between layers, ping-pong
  dnnl::layer_normalization_forward norm;
  dnnl::matmul up, gate, down;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t M, int64_t D, int64_t F, float eps) {
  static std::map<std::array<int64_t, 3>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 3> key{M, D, F};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc x_md({M, D}, f32, tag::ab), d_md({D}, f32, tag::a);
  memory::desc w_in_md({D, F}, f32, tag::ab), h_md({M, F}, f32, tag::ab), wd_md({F, D}, f32, tag::ab);
  dnnl::layer_normalization_forward::primitive_desc norm_pd(
      dnnl::layer_normalization_forward::desc(
          dnnl::prop_kind::forward_inference, x_md, eps,
          dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift),
      engine());
  dnnl::post_ops gating;
  gating.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  gating.append_binary(dnnl::algorithm::binary_mul, h_md);
  dnnl::primitive_attr gate_attr;
  gate_attr.set_post_ops(gating);
  dnnl::post_ops residual;
  residual.append_binary(dnnl::algorithm::binary_add, x_md);
  dnnl::primitive_attr down_attr;
  down_attr.set_post_ops(residual);
  dnnl::matmul::primitive_desc up_pd(dnnl::matmul::desc(x_md, w_in_md, h_md), engine());
  dnnl::matmul::primitive_desc gate_pd(dnnl::matmul::desc(x_md, w_in_md, h_md), gate_attr, engine());
  dnnl::matmul::primitive_desc down_pd(dnnl::matmul::desc(h_md, wd_md, x_md), down_attr, engine());
  Prim p{x_md,
         d_md,
         w_in_md,
         wd_md,
         memory(x_md, engine()),
         memory(h_md, engine()),
         memory(h_md, engine()),
         {memory(x_md, engine()), memory(x_md, engine())},
         dnnl::layer_normalization_forward(norm_pd),
         dnnl::matmul(up_pd),
         dnnl::matmul(gate_pd),
         dnnl::matmul(down_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* g, const float* b, const float* wg,
                            const float* wu, const float* wd, float* y, int64_t M, int64_t D,
                            int64_t F, int64_t L, float eps) {
  Prim& p = get(M, D, F, eps);
  dnnl::stream s(engine());
  const auto in = [](const memory::desc& md, const float* data) {
    return memory(md, engine(), const_cast<float*>(data));
  };
  memory src = in(p.x_md, x);
  for (int64_t l = 0; l < L; ++l) {
    memory dst = l == L - 1 ? memory(p.x_md, engine(), y) : p.stream_mem[l % 2];
    p.norm.execute(s, {{DNNL_ARG_SRC, src},
                       {DNNL_ARG_SCALE, in(p.d_md, g + l * D)},
                       {DNNL_ARG_SHIFT, in(p.d_md, b + l * D)},
                       {DNNL_ARG_DST, p.a}});
    p.up.execute(s, {{DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, in(p.w_in_md, wu + l * D * F)},
                     {DNNL_ARG_DST, p.u}});
    p.gate.execute(s, {{DNNL_ARG_SRC, p.a},
                       {DNNL_ARG_WEIGHTS, in(p.w_in_md, wg + l * D * F)},
                       {DNNL_ARG_DST, p.h},
                       {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, p.u}});
    p.down.execute(s, {{DNNL_ARG_SRC, p.h},
                       {DNNL_ARG_WEIGHTS, in(p.wd_md, wd + l * F * D)},
                       {DNNL_ARG_DST, dst},
                       {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, src}});
    src = dst;
  }
  s.wait();
}

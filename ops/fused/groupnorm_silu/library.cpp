// kope-library: onednn
// Group normalisation + SiLU as a composition of oneDNN primitives (oneDNN 2.x has no group
// normalisation): the NCHW tensor viewed as (N·G) rows of CG·H·W elements is one
// layer_normalization without scale or shift (each row is one group), writing y; then one binary
// primitive on y viewed as N×C×(H·W), in place: multiply by gamma (1×C×1, broadcast), a
// binary_add post-op for beta and a swish post-op (alpha = 1) for SiLU. Primitives are created
// on the first call for a shape and reused, so creation stays outside timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc rows_md, chw_md, chan_md;
  dnnl::layer_normalization_forward norm;
  dnnl::binary affine_silu;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t N, int64_t G, int64_t CG, int64_t HW, float eps) {
  static std::map<std::array<int64_t, 4>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 4> key{N, G, CG, HW};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  memory::desc rows_md({N * G, CG * HW}, f32, tag::ab);
  memory::desc chw_md({N, G * CG, HW}, f32, tag::abc), chan_md({1, G * CG, 1}, f32, tag::abc);
  dnnl::layer_normalization_forward::primitive_desc norm_pd(
      dnnl::layer_normalization_forward::desc(dnnl::prop_kind::forward_inference, rows_md, eps,
                                              dnnl::normalization_flags::none),
      engine());
  dnnl::post_ops ops;
  ops.append_binary(dnnl::algorithm::binary_add, chan_md);
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::binary::primitive_desc bin_pd(
      dnnl::binary::desc(dnnl::algorithm::binary_mul, chw_md, chan_md, chw_md), attr, engine());
  Prim p{rows_md, chw_md, chan_md, dnnl::layer_normalization_forward(norm_pd),
         dnnl::binary(bin_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* gamma, const float* beta, float* y,
                            int64_t N, int64_t G, int64_t CG, int64_t H, int64_t W, float eps) {
  Prim& p = get(N, G, CG, H * W, eps);
  dnnl::stream s(engine());
  memory src(p.rows_md, engine(), const_cast<float*>(x));
  memory normed(p.rows_md, engine(), y);
  memory yv(p.chw_md, engine(), y);
  memory g(p.chan_md, engine(), const_cast<float*>(gamma));
  memory b(p.chan_md, engine(), const_cast<float*>(beta));
  p.norm.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, normed}});
  p.affine_silu.execute(s, {{DNNL_ARG_SRC_0, yv},
                            {DNNL_ARG_SRC_1, g},
                            {DNNL_ARG_DST, yv},
                            {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, b}});
  s.wait();
}

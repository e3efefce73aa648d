// kope-library: onednn
// SwiGLU projection through two oneDNN matmul primitives: u = x·wu into a scratch buffer, then
// y = x·wg with a swish (alpha = 1, i.e. silu) eltwise post-op followed by a binary_mul post-op
// by u. Primitives and the scratch buffer are created on the first call for a shape and reused,
// so creation stays outside timed calls (calls for one shape must not overlap).
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w_md, y_md;
  memory u;  // x·wu, M x N
  dnnl::matmul up, gate;
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
  memory::desc x_md({M, K}, f32, tag::ab), w_md({K, N}, f32, tag::ab), y_md({M, N}, f32, tag::ab);
  dnnl::matmul::primitive_desc up_pd(dnnl::matmul::desc(x_md, w_md, y_md), engine());
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f);
  ops.append_binary(dnnl::algorithm::binary_mul, y_md);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  dnnl::matmul::primitive_desc gate_pd(dnnl::matmul::desc(x_md, w_md, y_md), attr, engine());
  Prim p{x_md, w_md, y_md, memory(y_md, engine()), dnnl::matmul(up_pd), dnnl::matmul(gate_pd)};
  return cache.emplace(key, std::move(p)).first->second;
}

}  // namespace

extern "C" void kope_kernel(const float* x, const float* wg, const float* wu, float* y, int64_t M,
                            int64_t N, int64_t K) {
  Prim& p = get(M, N, K);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<float*>(x));
  memory wgm(p.w_md, engine(), const_cast<float*>(wg));
  memory wum(p.w_md, engine(), const_cast<float*>(wu));
  memory ym(p.y_md, engine(), y);
  p.up.execute(s, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wum}, {DNNL_ARG_DST, p.u}});
  p.gate.execute(s, {{DNNL_ARG_SRC, xm},
                     {DNNL_ARG_WEIGHTS, wgm},
                     {DNNL_ARG_DST, ym},
                     {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, p.u}});
  s.wait();
}

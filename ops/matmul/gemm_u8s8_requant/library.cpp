// kope-library: onednn
// Int8 linear layer with requantisation through one oneDNN matmul primitive: u8 source, s8
// weights, int32 accumulation inside the primitive, per-column output scales (mask 1 << 1, given
// at run time) and an s8 destination, which oneDNN rounds to nearest even and saturates. The
// primitive is created on the first call for a shape and reused, so creation stays outside
// timed calls.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc x_md, w_md, scale_md, y_md;
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
  using dt = memory::data_type;
  memory::desc x_md({M, K}, dt::u8, tag::ab), w_md({K, N}, dt::s8, tag::ab);
  memory::desc scale_md({N}, dt::f32, tag::a), y_md({M, N}, dt::s8, tag::ab);
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x_md, w_md, y_md), attr, engine());
  return cache.emplace(key, Prim{x_md, w_md, scale_md, y_md, dnnl::matmul(pd)}).first->second;
}

}  // namespace

extern "C" void kope_kernel(const uint8_t* x, const int8_t* w, const float* scale, int8_t* y,
                            int64_t M, int64_t N, int64_t K) {
  Prim& p = get(M, N, K);
  dnnl::stream s(engine());
  memory xm(p.x_md, engine(), const_cast<uint8_t*>(x));
  memory wm(p.w_md, engine(), const_cast<int8_t*>(w));
  memory sm(p.scale_md, engine(), const_cast<float*>(scale));
  memory ym(p.y_md, engine(), y);
  p.prim.execute(s, {{DNNL_ARG_SRC, xm},
                     {DNNL_ARG_WEIGHTS, wm},
                     {DNNL_ARG_ATTR_OUTPUT_SCALES, sm},
                     {DNNL_ARG_DST, ym}});
  s.wait();
}

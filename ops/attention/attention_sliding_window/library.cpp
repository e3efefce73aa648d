// kope-library: onednn
// Causal sliding-window attention as a composition of oneDNN primitives, the way a framework
// without a fused local-attention kernel runs it: scores = Q·Kᵀ/√DH + mask over the full S×S
// square per (batch, head) as one batched matmul (K read transposed through strides, the scale
// an output scale), then the band mask added by a binary_add primitive (an S×S tensor of 0 and
// -inf broadcast over the batch), then softmax_forward over the last axis in place, then o = P·V
// as a batched matmul. The mask is not a post-op of the matmul: with it, oneDNN 2.7 runs the
// matmul on its reference implementation (ref:any, 700x slower: 7 s a call on B=1 H=8 S=1024),
// where alone it gets its JIT kernel (brg). It computes all S² scores where a banded kernel
// needs S·L: the baseline is the library composition, not the best possible kernel. Primitives,
// the mask and the score buffer are
// created on the first call for a shape and reused, so creation stays outside timed calls (calls
// for one shape must not overlap).
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

namespace {

using dnnl::memory;

struct Prim {
  memory::desc q_md, kt_md, v_md, o_md;
  std::vector<float> mask;  // S x S: 0 where i - L < j <= i, -inf elsewhere
  memory mask_mem, scores;
  dnnl::matmul qk, pv;
  dnnl::binary add_mask;
  dnnl::softmax_forward softmax;
};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

Prim& get(int64_t B, int64_t H, int64_t S, int64_t DH, int64_t L) {
  static std::map<std::array<int64_t, 5>, Prim> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const std::array<int64_t, 5> key{B, H, S, DH, L};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using tag = memory::format_tag;
  const auto f32 = memory::data_type::f32;
  const int64_t BH = B * H;  // matmul batch
  memory::desc q_md({BH, S, DH}, f32, tag::abc), v_md({BH, S, DH}, f32, tag::abc);
  memory::desc kt_md({BH, DH, S}, f32, memory::dims{S * DH, 1, DH});  // k read as kᵀ
  memory::desc s_md({BH, S, S}, f32, tag::abc), mask_md({1, S, S}, f32, tag::abc);
  memory::desc o_md({BH, S, DH}, f32, tag::abc);
  dnnl::primitive_attr attr;
  attr.set_output_scales(0, {static_cast<float>(1.0 / std::sqrt(static_cast<double>(DH)))});
  dnnl::matmul::primitive_desc qk_pd(dnnl::matmul::desc(q_md, kt_md, s_md), attr, engine());
  dnnl::binary::primitive_desc mask_pd(dnnl::binary::desc(dnnl::algorithm::binary_add, s_md, mask_md, s_md), engine());
  dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(s_md, v_md, o_md), engine());
  dnnl::softmax_forward::primitive_desc sm_pd(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md, 2), engine());
  Prim p{q_md, kt_md, v_md, o_md, std::vector<float>(static_cast<size_t>(S * S)),
         memory(), memory(s_md, engine()), dnnl::matmul(qk_pd), dnnl::matmul(pv_pd), dnnl::binary(mask_pd),
         dnnl::softmax_forward(sm_pd)};
  for (int64_t i = 0; i < S; ++i) {
    for (int64_t j = 0; j < S; ++j) {
      const bool visible = j <= i && j > i - L;
      p.mask[i * S + j] = visible ? 0.0f : -std::numeric_limits<float>::infinity();
    }
  }
  auto& entry = cache.emplace(key, std::move(p)).first->second;
  entry.mask_mem = memory(mask_md, engine(), entry.mask.data());
  return entry;
}

}  // namespace

extern "C" void kope_kernel(const float* q, const float* k, const float* v, float* o, int64_t B,
                            int64_t H, int64_t S, int64_t DH, int64_t L) {
  Prim& p = get(B, H, S, DH, L);
  dnnl::stream s(engine());
  memory qm(p.q_md, engine(), const_cast<float*>(q));
  memory ktm(p.kt_md, engine(), const_cast<float*>(k));
  memory vm(p.v_md, engine(), const_cast<float*>(v));
  memory om(p.o_md, engine(), o);
  p.qk.execute(s, {{DNNL_ARG_SRC, qm},
                   {DNNL_ARG_WEIGHTS, ktm},
                   {DNNL_ARG_DST, p.scores}});
  p.add_mask.execute(s, {{DNNL_ARG_SRC_0, p.scores}, {DNNL_ARG_SRC_1, p.mask_mem}, {DNNL_ARG_DST, p.scores}});
  p.softmax.execute(s, {{DNNL_ARG_SRC, p.scores}, {DNNL_ARG_DST, p.scores}});
  p.pv.execute(s, {{DNNL_ARG_SRC, p.scores}, {DNNL_ARG_WEIGHTS, vm}, {DNNL_ARG_DST, om}});
  s.wait();
}

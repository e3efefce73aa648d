// A port of tests/real-model/conv2d_3x3/1.cpp to machines without AVX-512: the model's kernel
// unchanged (packed direct convolution, scratch allocated per call, OpenMP), with its AVX-512
// intrinsics replaced by 8-lane GCC vector extensions (AVX2) and the tile narrowed to what 16
// vector registers hold (8 output channels x 8 pixels instead of 8 x 48).
// This is the kernel the fresh-data check once rejected as caching (issue 12).
#include <cstdint>
#include <cstdlib>
#include <cstring>

typedef float kv8 __attribute__((vector_size(32), aligned(4)));
typedef uint16_t kmask16;
constexpr int VL = 8;  // lanes per vector (16 in the AVX-512 original)
static inline kv8 kv_set1(float x) { return kv8{} + x; }
static inline kv8 kv_loadu(const float* p) { kv8 v; std::memcpy(&v, p, sizeof v); return v; }
static inline kv8 kv_fmadd(kv8 a, kv8 b, kv8 c) { return a * b + c; }
static inline void kv_store(float* p, kv8 v) { std::memcpy(p, &v, sizeof v); }
static inline void kv_mask_storeu(float* p, kmask16 m, kv8 v) {
    for (int l = 0; l < VL; ++l)
        if ((m >> l) & 1) p[l] = v[l];
}

namespace {

constexpr int MR    = 8;          // output channels per tile
constexpr int NVMAX = 1;          // VL-lane vectors of virtual pixels per tile
constexpr int TP    = VL * NVMAX; // virtual pixels per tile

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

static inline kmask16 lanes_lt(int64_t n) {           // lanes [0, n)
    if (n <= 0) return (kmask16)0;
    if (n >= VL) return (kmask16)((1u << VL) - 1u);
    return (kmask16)((1u << (unsigned)n) - 1u);
}
static inline kmask16 lanes_range(int64_t a, int64_t b) {  // lanes [a, b)
    return (kmask16)(lanes_lt(b) & (kmask16)~lanes_lt(a));
}

// Where the 16 lanes of each tile vector go in an output plane.
struct TileStore {
    bool fast;                       // W >= 14: at most one row break per vector
    int64_t lo[NVMAX], hi[NVMAX];
    kmask16 mlo[NVMAX], mhi[NVMAX];
    int64_t off[TP];                 // slow path: per-lane offset, -1 = not an output
};

// Virtual pixel q = h*WP + w (WP = W+1; w == W is a junk column).
// Input for tap (r,s) of virtual pixel q sits at plane[q + r*WP + s] (plane = origin - 1).
template <int NV>
static inline void conv_tile(const float* __restrict xb, int64_t PS, int64_t WP, int64_t C,
                             const float* __restrict wp, const float* __restrict b8,
                             float* __restrict yo, int64_t HW, int nvalid,
                             const TileStore& st) {
    kv8 acc[MR][NV];
#pragma GCC unroll 8
    for (int t = 0; t < MR; ++t) {
        const kv8 bv = kv_set1(b8[t]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) acc[t][v] = bv;
    }

    const float* xc = xb;
    const float* wc = wp;
    for (int64_t c = 0; c < C; ++c, xc += PS, wc += 9 * MR) {
#pragma GCC unroll 3
        for (int r = 0; r < 3; ++r) {
            const float* xr = xc + r * WP;
#pragma GCC unroll 3
            for (int s = 0; s < 3; ++s) {
                const float* xs = xr + s;
                const float* ws = wc + (r * 3 + s) * MR;
                kv8 bv[NV];
#pragma GCC unroll 3
                for (int v = 0; v < NV; ++v) bv[v] = kv_loadu(xs + VL * v);
#pragma GCC unroll 8
                for (int t = 0; t < MR; ++t) {
                    const kv8 a = kv_set1(ws[t]);
#pragma GCC unroll 3
                    for (int v = 0; v < NV; ++v) acc[t][v] = kv_fmadd(a, bv[v], acc[t][v]);
                }
            }
        }
    }

#pragma GCC unroll 8
    for (int t = 0; t < MR; ++t) {
        if (t < nvalid) {
            float* pl = yo + t * HW;
#pragma GCC unroll 3
            for (int v = 0; v < NV; ++v) {
                if (st.fast) {
                    kv_mask_storeu(pl + st.lo[v], st.mlo[v], acc[t][v]);
                    kv_mask_storeu(pl + st.hi[v], st.mhi[v], acc[t][v]);
                } else {
                    alignas(64) float tmp[VL];
                    kv_store(tmp, acc[t][v]);
                    for (int l = 0; l < VL; ++l) {
                        const int64_t o = st.off[v * VL + l];
                        if (o >= 0) pl[o] = tmp[l];
                    }
                }
            }
        }
    }
}

static void conv_naive(const float* x, const float* wt, const float* b, float* y, int64_t N,
                       int64_t C, int64_t H, int64_t W, int64_t CO) {
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < CO; ++o)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t w = 0; w < W; ++w) {
                    double s = b[o];
                    for (int64_t c = 0; c < C; ++c)
                        for (int64_t i = 0; i < 3; ++i) {
                            const int64_t hh = h + i - 1;
                            if (hh < 0 || hh >= H) continue;
                            for (int64_t j = 0; j < 3; ++j) {
                                const int64_t ww = w + j - 1;
                                if (ww < 0 || ww >= W) continue;
                                s += (double)x[((n * C + c) * H + hh) * W + ww] *
                                     (double)wt[((o * C + c) * 3 + i) * 3 + j];
                            }
                        }
                    y[((n * CO + o) * H + h) * W + w] = (float)s;
                }
}

static inline size_t round64(size_t v) { return (v + 63) & ~(size_t)63; }

}  // namespace

extern "C" void kope_kernel(const float* x, const float* wt, const float* b, float* y, int64_t N,
                            int64_t C, int64_t H, int64_t W, int64_t CO) {
    if (N <= 0 || CO <= 0 || H <= 0 || W <= 0) return;
    const int64_t HW = H * W;
    if (C <= 0) {
        for (int64_t n = 0; n < N; ++n)
            for (int64_t o = 0; o < CO; ++o)
                for (int64_t i = 0; i < HW; ++i) y[(n * CO + o) * HW + i] = b[o];
        return;
    }

    const int64_t WP = W + 1;              // shared zero column = left and right padding
    const int64_t PV = H * WP;             // virtual output pixels per image
    int64_t PS = 1 + (H + 2) * WP + 64;    // padded plane (+1 leading zero, + slack)
    PS = (PS + 15) & ~(int64_t)15;
    const int64_t nOT = (CO + MR - 1) / MR;
    const int64_t nTile = (PV + TP - 1) / TP;

    float* xpad = static_cast<float*>(std::aligned_alloc(64, round64((size_t)(N * C * PS) * sizeof(float))));
    float* wpk  = static_cast<float*>(std::aligned_alloc(64, round64((size_t)(nOT * MR * C * 9) * sizeof(float))));
    float* bpk  = static_cast<float*>(std::aligned_alloc(64, round64((size_t)(nOT * MR) * sizeof(float))));
    if (!xpad || !wpk || !bpk) {
        std::free(xpad); std::free(wpk); std::free(bpk);
        conv_naive(x, wt, b, y, N, C, H, W, CO);
        return;
    }

    const bool fast_store = (W >= 14);
    const bool par = (N * CO * HW * C * 9) >= ((int64_t)1 << 18);

#pragma omp parallel if (par)
    {
        // ---- zero-padded input planes: pl[0] = index -1, origin O = pl + 1 ----
        //  row 0 and row H+1 are zero, row h+1 holds x[h][0..W) and a zero at column W.
#pragma omp for schedule(static) nowait
        for (int64_t pc = 0; pc < N * C; ++pc) {
            float* pl = xpad + pc * PS;
            const float* src = x + pc * HW;
            for (int64_t i = 0; i < 1 + WP; ++i) pl[i] = 0.0f;
            float* O = pl + 1;
            for (int64_t h = 0; h < H; ++h) {
                float* dr = O + (h + 1) * WP;
                const float* sr = src + h * W;
                for (int64_t w = 0; w < W; ++w) dr[w] = sr[w];
                dr[W] = 0.0f;
            }
            for (int64_t i = 1 + (H + 1) * WP; i < PS; ++i) pl[i] = 0.0f;
        }

        // ---- weights packed [ot][c][r*3+s][8], zero-padded channels; bias padded ----
#pragma omp for schedule(static)
        for (int64_t ot = 0; ot < nOT; ++ot) {
            float* wo = wpk + ot * C * 9 * MR;
            for (int64_t c = 0; c < C; ++c)
                for (int k = 0; k < 9; ++k)
                    for (int t = 0; t < MR; ++t) {
                        const int64_t o = ot * MR + t;
                        wo[(c * 9 + k) * MR + t] = (o < CO) ? wt[(o * C + c) * 9 + k] : 0.0f;
                    }
            for (int t = 0; t < MR; ++t) {
                const int64_t o = ot * MR + t;
                bpk[ot * MR + t] = (o < CO) ? b[o] : 0.0f;
            }
        }
        // implicit barrier: xpad, wpk, bpk ready

#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < N * nOT; ++it) {
            const int64_t n = it / nOT;
            const int64_t ot = it - n * nOT;
            const float* xb_n = xpad + n * C * PS;
            const float* wp = wpk + ot * C * 9 * MR;
            const float* b8 = bpk + ot * MR;
            float* yo = y + (n * CO + ot * MR) * HW;
            const int nvalid = (int)imin(MR, CO - ot * MR);

            for (int64_t ti = 0; ti < nTile; ++ti) {
                const int64_t q0 = ti * TP;
                const int64_t rem = PV - q0;
                const int nv = (rem >= TP) ? NVMAX : (int)((rem + VL - 1) / VL);

                TileStore st;
                st.fast = fast_store;
                for (int v = 0; v < nv; ++v) {
                    const int64_t q = q0 + VL * v;
                    if (fast_store) {
                        const int64_t h = q / WP, w = q - (q / WP) * WP;
                        st.lo[v] = 0; st.hi[v] = 0; st.mlo[v] = 0; st.mhi[v] = 0;
                        if (h < H) {
                            st.lo[v]  = h * W + w;
                            st.mlo[v] = (w < W) ? lanes_lt(W - w) : (kmask16)0;
                            if (h + 1 < H) {
                                // lane l in row h+1: offset (h+1)*W + (w + l - WP) = h*W + w - 1 + l
                                st.mhi[v] = lanes_range(WP - w, W + WP - w);
                                if (st.mhi[v]) st.hi[v] = h * W + w - 1;
                            }
                        }
                    } else {
                        for (int l = 0; l < VL; ++l) {
                            const int64_t qq = q + l;
                            const int64_t hh = qq / WP, ww = qq - (qq / WP) * WP;
                            st.off[v * VL + l] = (hh < H && ww < W) ? (hh * W + ww) : -1;
                        }
                    }
                }

                const float* xb = xb_n + q0;   // = origin + q0 - 1
                conv_tile<1>(xb, PS, WP, C, wp, b8, yo, HW, nvalid, st);
            }
        }
    }

    std::free(xpad);
    std::free(wpk);
    std::free(bpk);
}

// Fused CPU kernel of continuous softmax attention (forward and analytic backward).
//
// Built at first use by tsattn/ops/continuous/cpu_build.py (the system C++ compiler, no torch
// headers, no OpenMP) and called through ctypes from cpu_kernel.py, on torch.get_num_threads()
// threads at once. The threads share the (batch, head) groups dynamically: each takes the next
// block of groups from an atomic counter until none is left, so a thread that the OS delays (a
// busy machine, OpenMP workers of torch still spinning after the previous op) only does less of
// the work. A group is computed by one thread and writes only its own outputs.
//
// Maths (docs/continuous-attention.md, "Segment form" and "Gradients"): knot 0 is the sink
// (k0, v0), knot j >= 1 is row j - 1 of k and v; interval i joins knots i - 1 and i and has
// length dt[b, i - 1]. Query t sees knots 0..hi(t), hi = min(t + 1, L) (causal) or L, with
// L = key_lengths[b] (N without lengths). With a_j = scale q . k_j, e_j = exp(a_j - m) and
// d = a_i - a_{i-1}:
//     cL_i = dt_i e_{i-1} phi2(d),   cR_i = dt_i e_i phi2(-d),   u_j = cL_{j+1} + cR_j
//     o = sum_j u_j v_j / sum_j u_j,  lse = m + log(sum_j u_j)      (hi = 0: u_0 = 1, o = v0)
// phi2 by its Taylor series for |d| < 1 (degree 9 in float, 17 in double) and by the closed
// forms outside. The backward recomputes the weights from the saved lse (e_j = exp(a_j - lse)
// gives the normalised weights p directly) and accumulates
//     dL/da_j = gp_j p_j + GD_{j+1} - GD_j,   GD_i = g_i (gp_i - gp_{i-1}),   gp_j = dO . v_j - dO . o
//     g_i = dt_i e_{i-1} phi2'(d),   dL/d dt_i = gp_{i-1} cL_i / dt_i + gp_i cR_i / dt_i
//
// Layout: a tile holds up to KT + 1 consecutive knots (rows c) against LANES queries (the lanes
// of one SIMD vector), so the neighbours of an interval are two rows, the row max is a lane-wise
// max and every elementwise step is a whole-vector operation. Score tiles never leave L1; a
// query tile reads only the knots 0..max hi of its queries (causal attention skips the unseen
// upper triangle, ragged rows their padding, which is never read).
//
// Portable vectors: GCC/Clang vector extensions as wide as the target's registers (VECTOR_BYTES:
// 64 with AVX-512, 32 with AVX/AVX2, 16 otherwise, e.g. SSE2 or NEON). IEEE semantics are kept
// (no -ffast-math): exp is evaluated by a polynomial with range reduction that returns inf, 0
// (with gradual underflow) and NaN where the C library would.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>

extern "C" {

// Mirrors cpu_kernel._KernelArgs (ctypes). Strides are in elements. Inputs may be any strided
// views (stride 0 for broadcast sinks and spacings); outputs are contiguous.
struct TsattnArgs {
    int64_t batch, heads, m, n, d, dv;
    int64_t causal;
    double scale;
    const void* q;  int64_t q_stride[4];    // [B, H, M, D]
    const void* k;  int64_t k_stride[4];    // [B, H, N, D]
    const void* v;  int64_t v_stride[4];    // [B, H, N, Dv]
    const void* k0; int64_t k0_stride[4];   // [B, H, 1, D]
    const void* v0; int64_t v0_stride[4];   // [B, H, 1, Dv]
    const void* dt; int64_t dt_stride[2];   // [B, N]
    const int64_t* lengths; int64_t lengths_stride;   // [B] or null (= N)
    void* o;        // [B, H, M, Dv]  forward output; backward input
    void* lse;      // [B, H, M]      forward output; backward input
    const void* dout; int64_t dout_stride[4];   // [B, H, M, Dv] backward input
    void* dq;       // [B, H, M, D]
    void* dk;       // [B, H, N, D]
    void* dvalues;  // [B, H, N, Dv]
    void* dk0;      // [B, H, 1, D]
    void* dv0;      // [B, H, 1, Dv]
    void* ddt;      // [B, H, N] (summed over heads by the caller)
};

}  // extern "C"

namespace {

constexpr int kAbiVersion = 2;
// The vector width: the widest register the target has. A vector type wider than the registers
// is not split cleanly by GCC (measured on an AVX2 machine: 64-byte vectors made the kernel 5-7x
// slower than 32-byte ones), so it follows the instruction set. -DVECTOR_BYTES=N overrides it
// (tests build every width: the kernel is the same for any number of lanes).
#ifndef VECTOR_BYTES
#if defined(__AVX512F__)
#define VECTOR_BYTES 64
#elif defined(__AVX__)
#define VECTOR_BYTES 32
#else
#define VECTOR_BYTES 16   // SSE2, NEON
#endif
#endif
static_assert(VECTOR_BYTES == 16 || VECTOR_BYTES == 32 || VECTOR_BYTES == 64, "VECTOR_BYTES: 16, 32 or 64");
constexpr int KT = 64;   // intervals per knot tile

template <typename T> struct Simd;
template <> struct Simd<float> {
    typedef float V __attribute__((vector_size(VECTOR_BYTES)));
    typedef int32_t I __attribute__((vector_size(VECTOR_BYTES)));
    static constexpr int LANES = VECTOR_BYTES / 4;
    static constexpr int SERIES_DEGREE = 9;     // phi.py: _SERIES_DEGREE[float32]
    static constexpr int EXP_DEGREE = 7;        // Taylor degree of exp on |r| <= ln2/2: 6e-9 < 2^-24
    static constexpr int MANTISSA = 23, BIAS = 127;
    static constexpr double EXP_LO = -103.97207708;   // below: exp underflows to 0
    static constexpr double EXP_HI = 88.72283905;     // above: exp overflows to inf
    static constexpr double LN2_HI = 0.693359375, LN2_LO = -2.12194440e-4;
    static constexpr double ROUND = 12582912.0;       // 1.5 * 2^23: x + ROUND - ROUND rounds to an integer
};
template <> struct Simd<double> {
    typedef double V __attribute__((vector_size(VECTOR_BYTES)));
    typedef int64_t I __attribute__((vector_size(VECTOR_BYTES)));
    static constexpr int LANES = VECTOR_BYTES / 8;
    static constexpr int SERIES_DEGREE = 17;    // phi.py: _SERIES_DEGREE[float64]
    static constexpr int EXP_DEGREE = 13;       // 4e-18 < 2^-53
    static constexpr int MANTISSA = 52, BIAS = 1023;
    static constexpr double EXP_LO = -745.13321910194122;
    static constexpr double EXP_HI = 709.78271289338397;
    static constexpr double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
    static constexpr double ROUND = 6755399441055744.0;   // 1.5 * 2^52
};

constexpr double factorial(int k) { return k <= 1 ? 1.0 : k * factorial(k - 1); }

template <typename T>
struct Kernel {
    using S = Simd<T>;
    using V = typename S::V;
    using I = typename S::I;
    static constexpr int LANES = S::LANES;
    static constexpr int DEG = S::SERIES_DEGREE;

    // ------------------------------------------------------------------ vector helpers
    static inline V load(const T* p) { V x; std::memcpy(&x, p, sizeof(V)); return x; }
    static inline void store(T* p, V x) { std::memcpy(p, &x, sizeof(V)); }
    static inline V splat(T x) { V r = {}; return r + x; }
    static inline V vmax(V a, V b) { return a > b ? a : b; }
    static inline V vabs(V x) { return x < T(0) ? -x : x; }
    static inline T hsum(V x) {
        T s = 0;
        for (int i = 0; i < LANES; ++i) s += x[i];
        return s;
    }

    // exp(x) lane-wise with IEEE edge cases: NaN -> NaN, x > EXP_HI -> inf, x < EXP_LO -> 0.
    static inline V vexp(V x) {
        const V lo = splat(T(S::EXP_LO)), hi = splat(T(S::EXP_HI));
        V xc = x < lo ? lo : x;
        xc = xc > hi ? hi : xc;
        const V round = splat(T(S::ROUND));
        V n = (xc * T(1.4426950408889634) + round) - round;      // nearest integer to x / ln 2
        V r = xc - n * T(S::LN2_HI);
        r = r - n * T(S::LN2_LO);                                 // |r| <= ln2 / 2
        V p = splat(T(1.0 / factorial(S::EXP_DEGREE)));
#pragma GCC unroll 16
        for (int k = S::EXP_DEGREE - 1; k >= 0; --k) p = p * r + T(1.0 / factorial(k));
        // 2^n in two factors 2^(n/2) 2^(n - n/2), each a normal number, so that the product
        // overflows and underflows (gradually) exactly like exp itself
        I ni = __builtin_convertvector(n, I);
        I n1 = ni >> 1;
        I n2 = ni - n1;
        V s1 = (V)((n1 + S::BIAS) << S::MANTISSA);
        V s2 = (V)((n2 + S::BIAS) << S::MANTISSA);
        V y = (p * s1) * s2;
        y = x < lo ? splat(T(0)) : y;
        y = x > hi ? splat(std::numeric_limits<T>::infinity()) : y;
        return x != x ? x : y;
    }

    // Taylor coefficients: phi2 c_k = 1/(k+2)!, phi2' c_k = (k+1)/(k+3)!, k = 0..DEG.
    static constexpr T phi2_coef(int k) { return T(1.0 / factorial(k + 2)); }
    static constexpr T dphi2_coef(int k) { return T((k + 1) / factorial(k + 3)); }

    // (sum_{k even} c_k x^k, sum_{k odd} c_k x^(k-1)) for phi2, by Horner in x^2
    static inline void phi2_even_odd(V x2, V& even, V& odd) {
        constexpr int top_even = DEG % 2 == 0 ? DEG : DEG - 1;
        constexpr int top_odd = DEG % 2 == 1 ? DEG : DEG - 1;
        even = splat(phi2_coef(top_even));
#pragma GCC unroll 16
        for (int k = top_even - 2; k >= 0; k -= 2) even = even * x2 + phi2_coef(k);
        odd = splat(phi2_coef(top_odd));
#pragma GCC unroll 16
        for (int k = top_odd - 2; k >= 1; k -= 2) odd = odd * x2 + phi2_coef(k);
    }

    static inline V dphi2_series(V x) {
        V acc = splat(dphi2_coef(DEG));
#pragma GCC unroll 32
        for (int k = DEG - 1; k >= 0; --k) acc = acc * x + dphi2_coef(k);
        return acc;
    }

    // Interval weights without the spacing: wl = e_L phi2(d), wr = e_R phi2(-d) (d = aR - aL);
    // with GRAD also g = e_L phi2'(d). Series for |d| < 1, closed forms outside (exact when one
    // end underflows).
    template <bool GRAD>
    static inline void interval(V aL, V aR, V eL, V eR, V& wl, V& wr, V& g) {
        const V one = splat(T(1));
        V d = aR - aL;
        auto small = vabs(d) < one;
        V ds = small ? d : splat(T(0));          // series argument
        V dl = small ? one : d;                  // closed-form argument, |dl| >= 1
        V even, odd;
        phi2_even_odd(ds * ds, even, odd);
        odd = odd * ds;
        V inv = one / dl;
        V inv2 = inv * inv;
        wl = small ? eL * (even + odd) : (eR - eL * (one + dl)) * inv2;
        wr = small ? eR * (even - odd) : (eL - eR * (one - dl)) * inv2;
        if (GRAD) {
            V series = eL * dphi2_series(ds);
            V closed = (eR * (dl - T(2)) + eL * (dl + T(2))) * (inv2 * inv);
            g = small ? series : closed;
        }
    }

    // ------------------------------------------------------------------ small products
    // out[c] = sum_{x < n} A[c * lda + x] * B[x]   (c < rows; B, out: one vector per row)
    static void rows_dot(const T* A, int64_t lda, int rows, int64_t n, const T* B, T* out) {
        int c = 0;
        for (; c + 8 <= rows; c += 8) {
            V a0 = {}, a1 = {}, a2 = {}, a3 = {}, a4 = {}, a5 = {}, a6 = {}, a7 = {};
            const T* p = A + c * lda;
            for (int64_t x = 0; x < n; ++x) {
                V b = load(B + x * LANES);
                a0 += p[x] * b; a1 += p[lda + x] * b; a2 += p[2 * lda + x] * b; a3 += p[3 * lda + x] * b;
                a4 += p[4 * lda + x] * b; a5 += p[5 * lda + x] * b; a6 += p[6 * lda + x] * b; a7 += p[7 * lda + x] * b;
            }
            store(out + (c + 0) * LANES, a0); store(out + (c + 1) * LANES, a1);
            store(out + (c + 2) * LANES, a2); store(out + (c + 3) * LANES, a3);
            store(out + (c + 4) * LANES, a4); store(out + (c + 5) * LANES, a5);
            store(out + (c + 6) * LANES, a6); store(out + (c + 7) * LANES, a7);
        }
        for (; c < rows; ++c) {
            V a = {};
            for (int64_t x = 0; x < n; ++x) a += A[c * lda + x] * load(B + x * LANES);
            store(out + c * LANES, a);
        }
    }

    // out[x] += sum_{c < rows} A[c * lda + x] * X[c]   (x < n; X, out: one vector per row)
    static void cols_accumulate(const T* A, int64_t lda, int rows, int64_t n, const T* X, T* out) {
        int64_t x = 0;
        for (; x + 8 <= n; x += 8) {
            V o0 = load(out + (x + 0) * LANES), o1 = load(out + (x + 1) * LANES);
            V o2 = load(out + (x + 2) * LANES), o3 = load(out + (x + 3) * LANES);
            V o4 = load(out + (x + 4) * LANES), o5 = load(out + (x + 5) * LANES);
            V o6 = load(out + (x + 6) * LANES), o7 = load(out + (x + 7) * LANES);
            for (int c = 0; c < rows; ++c) {
                V w = load(X + c * LANES);
                const T* p = A + c * lda + x;
                o0 += p[0] * w; o1 += p[1] * w; o2 += p[2] * w; o3 += p[3] * w;
                o4 += p[4] * w; o5 += p[5] * w; o6 += p[6] * w; o7 += p[7] * w;
            }
            store(out + (x + 0) * LANES, o0); store(out + (x + 1) * LANES, o1);
            store(out + (x + 2) * LANES, o2); store(out + (x + 3) * LANES, o3);
            store(out + (x + 4) * LANES, o4); store(out + (x + 5) * LANES, o5);
            store(out + (x + 6) * LANES, o6); store(out + (x + 7) * LANES, o7);
        }
        for (; x + 4 <= n; x += 4) {
            V o0 = load(out + (x + 0) * LANES), o1 = load(out + (x + 1) * LANES);
            V o2 = load(out + (x + 2) * LANES), o3 = load(out + (x + 3) * LANES);
            for (int c = 0; c < rows; ++c) {
                V w = load(X + c * LANES);
                const T* p = A + c * lda + x;
                o0 += p[0] * w; o1 += p[1] * w; o2 += p[2] * w; o3 += p[3] * w;
            }
            store(out + (x + 0) * LANES, o0); store(out + (x + 1) * LANES, o1);
            store(out + (x + 2) * LANES, o2); store(out + (x + 3) * LANES, o3);
        }
        for (; x < n; ++x) {
            V o = load(out + x * LANES);
            for (int c = 0; c < rows; ++c) o += A[c * lda + x] * load(X + c * LANES);
            store(out + x * LANES, o);
        }
    }

    // out[c * ldo + y] += sum_{r < LANES} X[c][r] * Y[r * ldy + y]   (c < rows, y < width:
    // a multiple of LANES; X: one vector per row, lane r = query r)
    static void rows_scatter(const T* X, int rows, const T* Y, int64_t ldy, int64_t width, T* out, int64_t ldo) {
        int c = 0;
        for (; c + 4 <= rows; c += 4) {
            const T* x0 = X + c * LANES;
            int64_t y = 0;
            for (; y + 2 * LANES <= width; y += 2 * LANES) {   // 4 rows x 2 vectors: each broadcast feeds two FMAs
                T* o = out + c * ldo + y;
                V a0 = load(o), a1 = load(o + ldo), a2 = load(o + 2 * ldo), a3 = load(o + 3 * ldo);
                V b0 = load(o + LANES), b1 = load(o + ldo + LANES), b2 = load(o + 2 * ldo + LANES), b3 = load(o + 3 * ldo + LANES);
                for (int r = 0; r < LANES; ++r) {
                    V ya = load(Y + r * ldy + y), yb = load(Y + r * ldy + y + LANES);
                    T s0 = x0[r], s1 = x0[LANES + r], s2 = x0[2 * LANES + r], s3 = x0[3 * LANES + r];
                    a0 += s0 * ya; a1 += s1 * ya; a2 += s2 * ya; a3 += s3 * ya;
                    b0 += s0 * yb; b1 += s1 * yb; b2 += s2 * yb; b3 += s3 * yb;
                }
                store(o, a0); store(o + ldo, a1); store(o + 2 * ldo, a2); store(o + 3 * ldo, a3);
                store(o + LANES, b0); store(o + ldo + LANES, b1); store(o + 2 * ldo + LANES, b2); store(o + 3 * ldo + LANES, b3);
            }
            for (; y < width; y += LANES) {
                T* o = out + c * ldo + y;
                V a0 = load(o), a1 = load(o + ldo), a2 = load(o + 2 * ldo), a3 = load(o + 3 * ldo);
                for (int r = 0; r < LANES; ++r) {
                    V yr = load(Y + r * ldy + y);
                    a0 += x0[r] * yr; a1 += x0[LANES + r] * yr; a2 += x0[2 * LANES + r] * yr; a3 += x0[3 * LANES + r] * yr;
                }
                store(o, a0); store(o + ldo, a1); store(o + 2 * ldo, a2); store(o + 3 * ldo, a3);
            }
        }
        for (; c < rows; ++c) {
            for (int64_t y = 0; y < width; y += LANES) {
                T* o = out + c * ldo + y;
                V a = load(o);
                for (int r = 0; r < LANES; ++r) a += X[c * LANES + r] * load(Y + r * ldy + y);
                store(o, a);
            }
        }
    }

    // ------------------------------------------------------------------ per-group state
    struct Workspace {
        int64_t d, dv, dpad, dvpad, knots;
        T* keys;      // [N+1][D]   knot rows 0..L of one group
        T* values;    // [N+1][Dv]
        T* spacing;   // [N+1]      spacing[i] = dt of interval i (i >= 1)
        T* qt;        // [D][LANES] scale * q of a query tile, transposed
        T* qrows;     // [LANES][dpad] scale * q rows (zero padded)
        T* acc;       // [Dv][LANES] forward: O accumulator; backward: dO transposed
        T* dorows;    // [LANES][dvpad]
        T* dqt;       // [D][LANES]
        T* scores;    // [KT+1][LANES]
        T* expo;      // [KT+1][LANES]
        T* weights;   // [KT+1][LANES] u (forward) / p (backward)
        T* gp;        // [KT+1][LANES]
        T* da;        // [KT+1][LANES]
        T* dkeys;     // [N+1][dpad]
        T* dvals;     // [N+1][dvpad]
        T* ddt;       // [N+1][LANES] lane-wise partial sums of dL/d dt_i at row i
        void* block;

        bool allocate(const TsattnArgs& a, bool backward) {
            d = a.d; dv = a.dv;
            dpad = (d + LANES - 1) / LANES * LANES;
            dvpad = (dv + LANES - 1) / LANES * LANES;
            knots = a.n + 1;
            const int64_t tile = (KT + 1) * LANES;
            int64_t sizes[16] = {
                knots * d, knots * dv, knots, d * LANES, LANES * dpad, dv * LANES, LANES * dvpad, d * LANES,
                tile, tile, tile, tile, tile,
                backward ? knots * dpad : 0, backward ? knots * dvpad : 0, backward ? knots * LANES : 0,
            };
            int64_t total = 0;
            for (int64_t& s : sizes) { s = (s + LANES - 1) / LANES * LANES; total += s; }
            block = std::aligned_alloc(64, size_t(total) * sizeof(T));
            if (block == nullptr) return false;
            T* p = static_cast<T*>(block);
            T** slots[16] = {&keys, &values, &spacing, &qt, &qrows, &acc, &dorows, &dqt,
                             &scores, &expo, &weights, &gp, &da, &dkeys, &dvals, &ddt};
            for (int i = 0; i < 16; ++i) { *slots[i] = p; p += sizes[i]; }
            std::memset(block, 0, size_t(total) * sizeof(T));
            return true;
        }
        ~Workspace() { std::free(block); }
    };

    struct Group {
        int64_t b, h, length;   // length: knots 1..length are real (0 <= length <= N)
    };

    static Group group_of(const TsattnArgs& a, int64_t g) {
        Group gr{g / a.heads, g % a.heads, a.n};
        if (a.lengths != nullptr) {
            int64_t len = a.lengths[gr.b * a.lengths_stride];
            gr.length = len < 0 ? 0 : (len > a.n ? a.n : len);
        }
        return gr;
    }

    // Knot rows 0..length (sink first) and the spacings of intervals 1..length.
    static void load_knots(const TsattnArgs& a, const Group& gr, Workspace& w) {
        const T* k = static_cast<const T*>(a.k);
        const T* v = static_cast<const T*>(a.v);
        const T* k0 = static_cast<const T*>(a.k0);
        const T* v0 = static_cast<const T*>(a.v0);
        const T* dt = static_cast<const T*>(a.dt);
        const int64_t d = a.d, dv = a.dv;
        for (int64_t x = 0; x < d; ++x)
            w.keys[x] = k0[gr.b * a.k0_stride[0] + gr.h * a.k0_stride[1] + x * a.k0_stride[3]];
        for (int64_t x = 0; x < dv; ++x)
            w.values[x] = v0[gr.b * a.v0_stride[0] + gr.h * a.v0_stride[1] + x * a.v0_stride[3]];
        const T* kb = k + gr.b * a.k_stride[0] + gr.h * a.k_stride[1];
        const T* vb = v + gr.b * a.v_stride[0] + gr.h * a.v_stride[1];
        for (int64_t j = 1; j <= gr.length; ++j) {
            const T* kr = kb + (j - 1) * a.k_stride[2];
            const T* vr = vb + (j - 1) * a.v_stride[2];
            for (int64_t x = 0; x < d; ++x) w.keys[j * d + x] = kr[x * a.k_stride[3]];
            for (int64_t x = 0; x < dv; ++x) w.values[j * dv + x] = vr[x * a.v_stride[3]];
            w.spacing[j] = dt[gr.b * a.dt_stride[0] + (j - 1) * a.dt_stride[1]];
        }
    }

    // Query tile [t0, t0 + LANES): scale * q transposed and as rows; per-lane last knot hi.
    // Padding lanes get zero queries and the largest hi of the tile (they are never written).
    static void load_queries(const TsattnArgs& a, const Group& gr, int64_t t0, int lanes, Workspace& w,
                             V& hi, int64_t& hi_min, int64_t& hi_max) {
        const T* q = static_cast<const T*>(a.q) + gr.b * a.q_stride[0] + gr.h * a.q_stride[1];
        const T scale = T(a.scale);
        const int64_t d = a.d;
        int64_t last[LANES];
        hi_min = gr.length;
        hi_max = 0;
        for (int r = 0; r < lanes; ++r) {
            last[r] = a.causal && t0 + r + 1 < gr.length ? t0 + r + 1 : gr.length;
            hi_min = last[r] < hi_min ? last[r] : hi_min;
            hi_max = last[r] > hi_max ? last[r] : hi_max;
        }
        T his[LANES];
        for (int r = 0; r < LANES; ++r) {
            his[r] = T(r < lanes ? last[r] : hi_max);
            for (int64_t x = 0; x < d; ++x) {
                T val = r < lanes ? scale * q[(t0 + r) * a.q_stride[2] + x * a.q_stride[3]] : T(0);
                w.qt[x * LANES + r] = val;
                w.qrows[r * w.dpad + x] = val;
            }
        }
        hi = load(his);
    }

    // ------------------------------------------------------------------ forward
    template <bool MASKED>
    static void forward_knot_tile(Workspace& w, int64_t j0, int rows, V hi, V& m, V& s) {
        const V zero = splat(T(0));
        T* sc = w.scores;
        rows_dot(w.keys + j0 * w.d, w.d, rows, w.d, w.qt, sc);
        V tile_max = splat(-std::numeric_limits<T>::infinity());
        for (int c = 0; c < rows; ++c) {
            V a = load(sc + c * LANES);
            if (MASKED) a = splat(T(j0 + c)) <= hi ? a : tile_max;
            tile_max = vmax(tile_max, a);
        }
        V m_new = vmax(m, tile_max);
        V alpha = vexp(m - m_new);     // 0 on the first tile (m = -inf)
        m = m_new;
        s = s * alpha;
        for (int64_t x = 0; x < w.dv; ++x) store(w.acc + x * LANES, load(w.acc + x * LANES) * alpha);
        for (int c = 0; c < rows; ++c) {
            V e = vexp(load(sc + c * LANES) - m);
            if (MASKED) e = splat(T(j0 + c)) <= hi ? e : zero;
            store(w.expo + c * LANES, e);
        }
        V carry = zero, total = zero, dummy;
        for (int c = 1; c < rows; ++c) {
            V wl, wr;
            interval<false>(load(sc + (c - 1) * LANES), load(sc + c * LANES), load(w.expo + (c - 1) * LANES),
                            load(w.expo + c * LANES), wl, wr, dummy);
            V spacing = splat(w.spacing[j0 + c]);
            if (MASKED) spacing = splat(T(j0 + c)) <= hi ? spacing : zero;
            V u = carry + wl * spacing;
            store(w.weights + (c - 1) * LANES, u);
            total += u;
            carry = wr * spacing;
        }
        store(w.weights + (rows - 1) * LANES, carry);
        total += carry;
        if (MASKED && j0 == 0) {                       // a lone sink (hi = 0): u_0 = e_0 = 1
            V lone = hi == zero ? splat(T(1)) : zero;
            store(w.weights, load(w.weights) + lone);
            total += lone;
        }
        s += total;
        cols_accumulate(w.values + j0 * w.dv, w.dv, rows, w.dv, w.weights, w.acc);
    }

    static void forward_group(const TsattnArgs& a, int64_t g, Workspace& w) {
        const Group gr = group_of(a, g);
        load_knots(a, gr, w);
        T* o = static_cast<T*>(a.o) + g * a.m * a.dv;
        T* lse = static_cast<T*>(a.lse) + g * a.m;
        for (int64_t t0 = 0; t0 < a.m; t0 += LANES) {
            const int lanes = int(a.m - t0 < LANES ? a.m - t0 : LANES);
            V hi;
            int64_t hi_min, hi_max;
            load_queries(a, gr, t0, lanes, w, hi, hi_min, hi_max);
            std::memset(w.acc, 0, sizeof(T) * w.dv * LANES);
            V m = splat(-std::numeric_limits<T>::infinity()), s = splat(T(0));
            for (int64_t j0 = 0;; j0 += KT) {
                const int rows = int((hi_max - j0 < KT ? hi_max - j0 : KT) + 1);
                if (j0 + rows - 1 > hi_min || hi_min == 0)
                    forward_knot_tile<true>(w, j0, rows, hi, m, s);
                else
                    forward_knot_tile<false>(w, j0, rows, hi, m, s);
                if (j0 + KT >= hi_max) break;
            }
            V inv_s = splat(T(1)) / s;
            for (int r = 0; r < lanes; ++r) lse[t0 + r] = m[r] + std::log(s[r]);
            for (int64_t x = 0; x < w.dv; ++x) {
                V ox = load(w.acc + x * LANES) * inv_s;
                for (int r = 0; r < lanes; ++r) o[(t0 + r) * a.dv + x] = ox[r];
            }
        }
    }

    // ------------------------------------------------------------------ backward
    template <bool MASKED>
    static void backward_knot_tile(Workspace& w, int64_t j0, int rows, V hi, V lse, V delta) {
        const V zero = splat(T(0));
        T* sc = w.scores;
        rows_dot(w.keys + j0 * w.d, w.d, rows, w.d, w.qt, sc);
        rows_dot(w.values + j0 * w.dv, w.dv, rows, w.dv, w.acc, w.gp);   // acc holds dO^T here
        for (int c = 0; c < rows; ++c) {
            store(w.gp + c * LANES, load(w.gp + c * LANES) - delta);
            V e = vexp(load(sc + c * LANES) - lse);                       // normalised: p directly
            if (MASKED) e = splat(T(j0 + c)) <= hi ? e : zero;
            store(w.expo + c * LANES, e);
        }
        V carry_p = zero, carry_da = zero;
        for (int c = 1; c < rows; ++c) {
            V wl, wr, g;
            interval<true>(load(sc + (c - 1) * LANES), load(sc + c * LANES), load(w.expo + (c - 1) * LANES),
                           load(w.expo + c * LANES), wl, wr, g);
            V spacing = splat(w.spacing[j0 + c]);
            V gp_l = load(w.gp + (c - 1) * LANES), gp_r = load(w.gp + c * LANES);
            V ddt = gp_l * wl + gp_r * wr;
            if (MASKED) {
                auto seen = splat(T(j0 + c)) <= hi;
                spacing = seen ? spacing : zero;
                ddt = seen ? ddt : zero;
            }
            T* ddt_row = w.ddt + (j0 + c) * LANES;
            store(ddt_row, load(ddt_row) + ddt);
            V cl = wl * spacing, cr = wr * spacing;
            V gd = g * spacing * (gp_r - gp_l);
            store(w.weights + (c - 1) * LANES, carry_p + cl);
            store(w.da + (c - 1) * LANES, carry_da + gp_l * cl + gd);
            carry_p = cr;
            carry_da = gp_r * cr - gd;
        }
        store(w.weights + (rows - 1) * LANES, carry_p);
        store(w.da + (rows - 1) * LANES, carry_da);
        // a lone sink (hi = 0) has p_0 = 1 and dL/da_0 = gp_0 p_0 = (dO . v0 - dO . o) = 0 exactly
        if (MASKED && j0 == 0) store(w.weights, load(w.weights) + (hi == zero ? splat(T(1)) : zero));
        cols_accumulate(w.keys + j0 * w.d, w.d, rows, w.d, w.da, w.dqt);
        rows_scatter(w.da, rows, w.qrows, w.dpad, w.dpad, w.dkeys + j0 * w.dpad, w.dpad);
        rows_scatter(w.weights, rows, w.dorows, w.dvpad, w.dvpad, w.dvals + j0 * w.dvpad, w.dvpad);
    }

    static void backward_group(const TsattnArgs& a, int64_t g, Workspace& w) {
        const Group gr = group_of(a, g);
        load_knots(a, gr, w);
        const int64_t knots = gr.length + 1;
        std::memset(w.dkeys, 0, sizeof(T) * knots * w.dpad);
        std::memset(w.dvals, 0, sizeof(T) * knots * w.dvpad);
        std::memset(w.ddt, 0, sizeof(T) * knots * LANES);
        const T* o = static_cast<const T*>(a.o) + g * a.m * a.dv;
        const T* lse_g = static_cast<const T*>(a.lse) + g * a.m;
        const T* dout = static_cast<const T*>(a.dout) + gr.b * a.dout_stride[0] + gr.h * a.dout_stride[1];
        T* dq = static_cast<T*>(a.dq) + g * a.m * a.d;
        for (int64_t t0 = 0; t0 < a.m; t0 += LANES) {
            const int lanes = int(a.m - t0 < LANES ? a.m - t0 : LANES);
            V hi;
            int64_t hi_min, hi_max;
            load_queries(a, gr, t0, lanes, w, hi, hi_min, hi_max);
            T lse_l[LANES], delta_l[LANES];
            for (int r = 0; r < LANES; ++r) {
                T dsum = 0;
                for (int64_t x = 0; x < w.dv; ++x) {
                    T dox = r < lanes ? dout[(t0 + r) * a.dout_stride[2] + x * a.dout_stride[3]] : T(0);
                    w.acc[x * LANES + r] = dox;
                    w.dorows[r * w.dvpad + x] = dox;
                    if (r < lanes) dsum += dox * o[(t0 + r) * a.dv + x];
                }
                delta_l[r] = dsum;
                lse_l[r] = r < lanes ? lse_g[t0 + r] : T(0);
            }
            const V lse = load(lse_l), delta = load(delta_l);
            std::memset(w.dqt, 0, sizeof(T) * w.d * LANES);
            for (int64_t j0 = 0;; j0 += KT) {
                const int rows = int((hi_max - j0 < KT ? hi_max - j0 : KT) + 1);
                if (j0 + rows - 1 > hi_min || hi_min == 0)
                    backward_knot_tile<true>(w, j0, rows, hi, lse, delta);
                else
                    backward_knot_tile<false>(w, j0, rows, hi, lse, delta);
                if (j0 + KT >= hi_max) break;
            }
            const T scale = T(a.scale);
            for (int64_t x = 0; x < w.d; ++x) {
                V dqx = load(w.dqt + x * LANES) * scale;
                for (int r = 0; r < lanes; ++r) dq[(t0 + r) * a.d + x] = dqx[r];
            }
        }
        // knot rows -> dk0/dv0 (row 0) and dk/dv (rows 1..L); rows past L get zero gradient
        T* dk = static_cast<T*>(a.dk) + g * a.n * a.d;
        T* dvals = static_cast<T*>(a.dvalues) + g * a.n * a.dv;
        T* dk0 = static_cast<T*>(a.dk0) + g * a.d;
        T* dv0 = static_cast<T*>(a.dv0) + g * a.dv;
        T* ddt = static_cast<T*>(a.ddt) + g * a.n;
        for (int64_t x = 0; x < a.d; ++x) dk0[x] = w.dkeys[x];
        for (int64_t x = 0; x < a.dv; ++x) dv0[x] = w.dvals[x];
        for (int64_t j = 1; j <= a.n; ++j) {
            const bool real = j <= gr.length;
            for (int64_t x = 0; x < a.d; ++x) dk[(j - 1) * a.d + x] = real ? w.dkeys[j * w.dpad + x] : T(0);
            for (int64_t x = 0; x < a.dv; ++x) dvals[(j - 1) * a.dv + x] = real ? w.dvals[j * w.dvpad + x] : T(0);
            ddt[j - 1] = real ? hsum(load(w.ddt + j * LANES)) : T(0);
        }
    }

    // the kernel's exp on n values (tests compare it with the C library's)
    static void exp_array(const T* x, T* y, int64_t n) {
        int64_t i = 0;
        for (; i + LANES <= n; i += LANES) store(y + i, vexp(load(x + i)));
        if (i < n) {
            T buf[LANES] = {};
            std::memcpy(buf, x + i, sizeof(T) * size_t(n - i));
            store(buf, vexp(load(buf)));
            std::memcpy(y + i, buf, sizeof(T) * size_t(n - i));
        }
    }

    // Blocks of `block` groups taken from `next_group` until all batch * heads groups are done.
    template <bool BACKWARD>
    static int run(const TsattnArgs* a, int64_t* next_group, int64_t block) {
        Workspace w{};
        if (!w.allocate(*a, BACKWARD)) return 1;
        const int64_t groups = a->batch * a->heads;
        for (;;) {
            const int64_t g0 = __atomic_fetch_add(next_group, block, __ATOMIC_RELAXED);
            if (g0 >= groups) return 0;
            const int64_t g1 = g0 + block < groups ? g0 + block : groups;
            for (int64_t g = g0; g < g1; ++g) {
                if (BACKWARD)
                    backward_group(*a, g, w);
                else
                    forward_group(*a, g, w);
            }
        }
    }
};

}  // namespace

extern "C" {

int tsattn_cpu_abi_version(void) { return kAbiVersion; }
int64_t tsattn_cpu_args_size(void) { return int64_t(sizeof(TsattnArgs)); }
int tsattn_cpu_vector_bytes(void) { return VECTOR_BYTES; }

// Every calling thread takes blocks of `block` groups from *next_group (shared, starting at 0)
// until the batch * heads groups are done. 0 on success, 1 when the workspace cannot be allocated.
int tsattn_cpu_forward_f32(const TsattnArgs* a, int64_t* next_group, int64_t block) {
    return Kernel<float>::run<false>(a, next_group, block);
}
int tsattn_cpu_forward_f64(const TsattnArgs* a, int64_t* next_group, int64_t block) {
    return Kernel<double>::run<false>(a, next_group, block);
}
int tsattn_cpu_backward_f32(const TsattnArgs* a, int64_t* next_group, int64_t block) {
    return Kernel<float>::run<true>(a, next_group, block);
}
int tsattn_cpu_backward_f64(const TsattnArgs* a, int64_t* next_group, int64_t block) {
    return Kernel<double>::run<true>(a, next_group, block);
}

void tsattn_cpu_exp_f32(const float* x, float* y, int64_t n) { Kernel<float>::exp_array(x, y, n); }
void tsattn_cpu_exp_f64(const double* x, double* y, int64_t n) { Kernel<double>::exp_array(x, y, n); }

}  // extern "C"

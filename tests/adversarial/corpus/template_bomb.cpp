// expect: compile_error
// op: vadd
// Each level doubles a parameter pack: 2^40 types. The compiler runs out of its limits.
#include <cstdint>

template <class... T>
struct List {};
template <int N, class... T>
struct Grow {
  using type = typename Grow<N - 1, T..., T...>::type;
};
template <class... T>
struct Grow<0, T...> {
  using type = List<T...>;
};
using Boom = Grow<40, int>::type;

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) { Boom b; (void)b; }

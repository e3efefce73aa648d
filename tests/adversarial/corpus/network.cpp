// expect: rejected
// op: vadd
// expect-uninspected: rejected
// message: network
// Tries to reach a server on the host (the test listens on @PORT@).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

extern "C" void kope_kernel(const float* x, const float* y, float* z, int64_t N) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(@PORT@);
  a.sin_addr.s_addr = htonl(0x7f000001);
  if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) send(s, "pwned", 5, 0);
  for (int64_t i = 0; i < N; ++i) z[i] = x[i] + y[i];
}

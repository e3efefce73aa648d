// util/hash.h — content hashes used for content addressing and golden tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kope::util {

// Lower-case hex SHA-256 of the bytes. Thread-safe.
std::string sha256_hex(std::string_view data);

// Incremental SHA-256, for hashing large buffers piecewise.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex_digest();  // finalises; the object must not be updated afterwards

 private:
  void* m_ctx;
};

// 64-bit FNV-1a, for cheap non-cryptographic keys.
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);

}  // namespace kope::util

#include "memory/codec.h"

#include <openssl/sha.h>
#include <zstd.h>

#include <algorithm>

namespace kope::memory {

namespace {
constexpr int k_zstd_level = 3;  // zstd's default: about as small as 6 for source code, much faster
constexpr size_t k_max_code_bytes = 64u << 20;
}  // namespace

std::string content_hash(std::string_view data) {
  std::string out(SHA256_DIGEST_LENGTH, '\0');
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

Result<std::string> compress(std::string_view data) {
  // One compression context per thread, reused: creating one per call costs more than
  // compressing a kernel.
  struct Ctx {
    ZSTD_CCtx* ctx = ZSTD_createCCtx();
    ~Ctx() { ZSTD_freeCCtx(ctx); }
  };
  thread_local Ctx cctx;
  if (!cctx.ctx) return fail(ErrorKind::internal, "zstd: cannot create a compression context");
  std::string out(1 + ZSTD_compressBound(data.size()), '\0');
  out[0] = 'z';
  size_t n = ZSTD_compressCCtx(cctx.ctx, out.data() + 1, out.size() - 1, data.data(), data.size(), k_zstd_level);
  if (ZSTD_isError(n)) return fail(ErrorKind::internal, "zstd compression failed: {}", ZSTD_getErrorName(n));
  if (n >= data.size()) return "r" + std::string(data);
  out.resize(1 + n);
  return out;
}

Result<std::string> decompress(std::string_view frame, size_t expected_size) {
  if (expected_size > k_max_code_bytes) {
    return fail(ErrorKind::corrupt, "stored code claims {} bytes (more than the {} byte limit)", expected_size,
                k_max_code_bytes);
  }
  if (frame.empty()) return fail(ErrorKind::corrupt, "stored code is empty");
  char tag = frame.front();
  frame.remove_prefix(1);
  if (tag == 'r') {
    if (frame.size() != expected_size) {
      return fail(ErrorKind::corrupt, "stored code has {} bytes, expected {}", frame.size(), expected_size);
    }
    return std::string(frame);
  }
  if (tag != 'z') return fail(ErrorKind::corrupt, "stored code has an unknown encoding");
  std::string out(expected_size, '\0');
  size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n)) return fail(ErrorKind::corrupt, "stored code does not decompress: {}", ZSTD_getErrorName(n));
  if (n != expected_size) {
    return fail(ErrorKind::corrupt, "stored code decompressed to {} bytes, expected {}", n, expected_size);
  }
  return out;
}

bool is_zstd_frame(std::string_view data) {
  return data.size() >= 4 && static_cast<unsigned char>(data[0]) == 0x28 && static_cast<unsigned char>(data[1]) == 0xb5 &&
         static_cast<unsigned char>(data[2]) == 0x2f && static_cast<unsigned char>(data[3]) == 0xfd;
}

Result<std::string> zstd_compress_file(std::string_view data, int level) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), std::clamp(level, 1, ZSTD_maxCLevel()));
  if (ZSTD_isError(n)) return fail(ErrorKind::internal, "zstd compression failed: {}", ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

Result<std::string> zstd_decompress_file(std::string_view frame, std::string_view what, size_t max_bytes) {
  // Streamed: a frame need not state its content size (`zstd` writing to a pipe does not).
  struct Ctx {
    ZSTD_DCtx* ctx = ZSTD_createDCtx();
    ~Ctx() { ZSTD_freeDCtx(ctx); }
  } dctx;
  if (!dctx.ctx) return fail(ErrorKind::internal, "zstd: cannot create a decompression context");
  std::string out;
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  size_t last = 0;  // 0 once a frame is complete (a hint of the bytes still expected otherwise)
  for (;;) {
    ZSTD_outBuffer ob{chunk.data(), chunk.size(), 0};
    last = ZSTD_decompressStream(dctx.ctx, &ob, &in);
    if (ZSTD_isError(last)) return fail(ErrorKind::corrupt, "{}: does not decompress: {}", what, ZSTD_getErrorName(last));
    out.append(chunk.data(), ob.pos);
    if (out.size() > max_bytes) return fail(ErrorKind::corrupt, "{}: decompresses to more than {} bytes", what, max_bytes);
    // All input read and the output not filled: the decoder holds nothing more.
    if (in.pos == in.size && ob.pos < ob.size) break;
  }
  if (last != 0) return fail(ErrorKind::corrupt, "{}: the zstd data is truncated", what);
  return out;
}

}  // namespace kope::memory

// memory/codec.h — content addressing and compression of stored code (SHA-256 + zstd).
#pragma once

#include <string>
#include <string_view>

#include "kope/error.h"

namespace kope::memory {

// The content address of `data`: its SHA-256 as 32 raw bytes. Thread-safe.
std::string content_hash(std::string_view data);

// Encodes `data` for storage: one tag byte, then a zstd frame ('z', level 3) or, when
// compression does not pay (tiny inputs), the bytes as they are
// ('r'). Thread-safe.
Result<std::string> compress(std::string_view data);
// Decodes what compress() produced; fails with corrupt when the data is damaged or its size
// differs from `expected_size`.
Result<std::string> decompress(std::string_view frame, size_t expected_size);

}  // namespace kope::memory

namespace kope::memory {

// Whether `data` begins with a zstd frame's magic number (28 b5 2f fd).
bool is_zstd_frame(std::string_view data);
// A whole file's bytes as one standard zstd frame (readable by the `zstd` tool), at `level`
// (1..19). Thread-safe.
Result<std::string> zstd_compress_file(std::string_view data, int level = 19);
// The content of one or more concatenated zstd frames (as `zstd -d` writes it). Fails with
// corrupt, naming `what`, when the data is damaged or decompresses past `max_bytes`.
Result<std::string> zstd_decompress_file(std::string_view frame, std::string_view what,
                                         size_t max_bytes = size_t{2} << 30);

}  // namespace kope::memory

// memory/codec.h — content addressing and compression of stored code (SHA-256 + zstd).
#pragma once

#include <string>
#include <string_view>

#include "kope/error.h"

namespace kope::memory {

// zstd-compresses `data` (level 6: code is written once and read rarely). Thread-safe.
Result<std::string> compress(std::string_view data);
// Decompresses a frame produced by compress(); fails with corrupt when the frame is damaged or
// its size differs from `expected_size`.
Result<std::string> decompress(std::string_view frame, size_t expected_size);

}  // namespace kope::memory

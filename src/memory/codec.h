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

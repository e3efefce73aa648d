// spec/scaffold.h — a new operator folder to start from (`kope ops new NAME --category C`).
//
// The folder holds an op.toml that loads as it is (y = x over one dim, with every part of the
// format documented in comments, the v2 features among them) and a reference.cpp whose
// signature is the one render_signature() gives for that op.toml, so the reference compiles
// before the user changes anything. Thread-safe.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "kope/error.h"
#include "kope/spec.h"

namespace kope::spec {

// The commented op.toml of a new op. `name` and `category` must be valid (see create_op_folder).
std::string scaffold_op_toml(std::string_view name, std::string_view category);

// The reference.cpp of the scaffold's op (parsed from scaffold_op_toml): its signature, as
// render_signature() gives it, and the body y = x.
std::string scaffold_reference(const OpSpec& op);

// Creates root/category/name/ with op.toml and reference.cpp and returns the folder. Fails with
// config when the name or category is not valid for op.toml, and with io when the folder exists
// already (nothing is overwritten) or cannot be written.
Result<std::filesystem::path> create_op_folder(const std::filesystem::path& root, std::string_view name,
                                               std::string_view category);

}  // namespace kope::spec

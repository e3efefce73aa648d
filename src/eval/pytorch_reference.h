// eval/pytorch_reference.h — trusted references written as PyTorch models (docs/design.md §2,
// "PyTorch references").
//
// An op whose op.toml says `reference = "reference.py"` has a PyTorch reference. It is built
// like a C++ reference, into a trusted shared object with a `kope_entry`: a generated
// translation unit that embeds Debian's Python (the one with `python3-torch`), the op's
// reference.py and a manifest of its tensors. kope-runner loads it in trusted mode in its own
// sandboxed process, so the reference sees the same sealed input buffers as every kernel,
// writes its outputs into the same guarded output buffers, and is verified against and timed
// through the same path as a C++ reference; nothing of it runs in kope's own process.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "eval/native.h"
#include "kope/error.h"
#include "kope/spec.h"

namespace kope::eval {

// True when the op's reference is a PyTorch model (op.toml's `reference` names a .py file).
bool has_pytorch_reference(const spec::OpSpec& op);

// The Python a PyTorch reference is built against and run by: $KOPE_PYTHON, default
// /usr/bin/python3 (Debian's, which python3-torch installs into; a python3 earlier on PATH,
// e.g. a pyenv one, usually lacks torch).
std::string python_executable();

// How to embed that Python: its compile and link flags and the soname of libpython.
struct PythonEmbed {
  std::string version;             // "3.11"
  std::vector<std::string> flags;  // -I... -L... -lpython3.11
  std::string soname;              // libpython3.11.so.1.0
  std::string torch_version;       // "1.13.0a0"
};

// Asks python_executable() once (cached; thread-safe). Fails with `unavailable`, saying what to
// install, when there is no such Python, no libpython to embed or no torch.
Result<PythonEmbed> python_embed();

// The translation unit of an op's PyTorch reference: kope_entry(buffers, dims) for `op`, with
// `reference_source` (the text of reference.py) and kope's harness embedded.
std::string render_pytorch_bridge(const spec::OpSpec& op, std::string_view reference_source, const PythonEmbed& py);

// Builds op.reference_path (a reference.py) into a trusted shared object, cached by content
// under cache_dir()/trusted like build_trusted(). Errors: unavailable (no torch), config (the
// bridge does not compile).
Result<fs::path> build_pytorch_reference(const spec::OpSpec& op, const Toolchain& tc);

}  // namespace kope::eval

#include "eval/kernelbench.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <thread>

#include <nlohmann/json.hpp>

#include "eval/kernelbench_scripts.h"
#include "eval/pytorch_reference.h"
#include "eval/sandbox.h"
#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;

// The introspection runs the problem at its original size, once per size constant (the dim
// probe) and once per variant: generous but finite.
constexpr std::chrono::minutes k_introspect_timeout{20};
constexpr uint64_t k_introspect_memory = 24ull << 30;
// The original size is timed when its buffers fit this; a checked variant must fit the smaller
// bound (the suite's cases stay cheap to verify).
constexpr uint64_t k_timed_case_bytes = 1ull << 30;
constexpr uint64_t k_checked_case_bytes = 256ull << 20;

std::string lower_identifier(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

// A category from the problem's title; level 2 and up are fused operators.
std::string guess_category(const std::string& title, int level) {
  if (level >= 2) return "fused";
  std::string t = lower_identifier(title);
  auto has = [&](std::initializer_list<const char*> words) {
    return std::any_of(words.begin(), words.end(), [&](const char* w) { return t.find(w) != std::string::npos; });
  };
  if (has({"matmul", "matrix_mult", "gemm", "bmm", "matrix_vector"})) return "matmul";
  if (has({"conv"})) return "conv";
  if (has({"pool"})) return "pooling";
  if (has({"attention"})) return "attention";
  if (has({"loss", "entropy"})) return "loss";
  if (has({"cumsum", "cumprod", "scan"})) return "scan";
  if (has({"norm", "softmax"})) return "normalization";
  if (has({"sum", "mean", "max", "min", "prod", "reduction"})) return "reduction";
  return "elementwise";
}

// Runs introspect.py on the problem in a sandbox: the problem and the script are the only
// files it sees besides /usr; no network.
Result<json> introspect(const fs::path& file) {
  KOPE_ASSIGN(std::string problem, util::read_file(file));
  KOPE_ASSIGN(util::TempDir scratch, util::TempDir::create("kope-run-", sandbox_scratch_parent()));
  std::string script = std::string(kernelbench_scripts::k_problem) + "\n" + kernelbench_scripts::k_introspect;
  KOPE_TRY(util::write_file_atomic(scratch.path() / "introspect.py", script));
  KOPE_TRY(util::write_file_atomic(scratch.path() / "problem.py", problem));
  for (const char* name : {"introspect.py", "problem.py"}) ::chmod((scratch.path() / name).c_str(), 0644);
  ::chmod(scratch.path().c_str(), 0755);
  SandboxSpec spec;
  spec.uid = prepare_sandbox_uid({});
  spec.ro_binds.emplace_back(scratch.path(), "/kope");
  spec.proc = true;
  spec.tmp_bytes = 256ull << 20;
  unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 4u);
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}, {"HOME", "/tmp"}, {"OMP_NUM_THREADS", std::to_string(threads)}};
  // Messages name the file as the user gave it.
  spec.command = {python_executable(), "-I", "/kope/introspect.py", "/kope/problem.py", file.filename().string()};
  util::RunOptions ro;
  KOPE_ASSIGN(ro.spawn.argv, sandbox_argv(spec));
  ro.spawn.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LANG=C"};
  ro.spawn.limits.address_space_bytes = k_introspect_memory;
  ro.spawn.limits.cpu_seconds = static_cast<uint64_t>(threads) * 3600;
  ro.spawn.limits.file_size_bytes = 16ull << 20;
  ro.timeout = k_introspect_timeout;
  ro.stderr_cap = 64 << 10;
  KOPE_ASSIGN(util::RunResult r, util::run(ro));
  if (r.timed_out) return fail(ErrorKind::config, "{}: the introspection ran past {} minutes", file.string(), k_introspect_timeout.count());
  if (!r.status.success()) {
    return fail(ErrorKind::config, "{}: the introspection {}:\n{}", file.string(), r.status.describe(), util::truncate_text(r.err, 3000, 30));
  }
  json j;
  try {
    j = json::parse(r.out);
  } catch (const json::exception&) {
    return fail(ErrorKind::internal, "{}: the introspection printed no JSON:\n{}", file.string(), util::truncate_text(r.out + r.err, 3000, 30));
  }
  if (j.contains("error")) {
    int line = j.value("line", 0);
    return fail(ErrorKind::config, "{}{}: {}", file.string(), line > 0 ? fmt::format(":{}", line) : "", j.at("error").get<std::string>());
  }
  return j;
}

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string toml_names(const std::vector<std::string>& names) {
  std::vector<std::string> q;
  for (const auto& n : names) q.push_back(toml_string(n));
  return "[" + util::join(q, ", ") + "]";
}

// "A * B * C" of a tensor's shape ("1" for a scalar).
std::string element_expr(const json& t) {
  std::vector<std::string> dims = t.at("shape").get<std::vector<std::string>>();
  return dims.empty() ? "1" : util::join(dims, " * ");
}

size_t dtype_bytes(const std::string& dtype) {
  auto d = spec::parse_dtype(dtype);
  return d ? spec::dtype_size(*d) : 4;
}

uint64_t case_bytes(const json& tensors, const json& dims) {
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t n = dtype_bytes(t.at("dtype").get<std::string>());
    for (const auto& d : t.at("shape")) {
      std::string axis = d.get<std::string>();  // a dim, or a number where it never varies
      n *= std::isdigit(static_cast<unsigned char>(axis[0])) ? std::stoull(axis) : dims.at(axis).get<uint64_t>();
    }
    total += n;
  }
  return total;
}

std::string tensor_line(const json& t) {
  std::string line = fmt::format("  {{ name = {}, dtype = {}, shape = {}", toml_string(t.at("name").get<std::string>()),
                                 toml_string(t.at("dtype").get<std::string>()),
                                 toml_names(t.at("shape").get<std::vector<std::string>>()));
  if (t.contains("init") && !t.at("init").get<std::string>().empty()) line += fmt::format(", init = {}", toml_string(t.at("init").get<std::string>()));
  return line + " },";
}

struct Rendered {
  std::string op_toml;
  std::string reference_py;
  std::string readme_line;
};

Rendered render(const KernelbenchImport& o, const KernelbenchName& kb, const std::string& name, const std::string& category,
                int level, const std::string& problem, const json& j) {
  const json& tensors = j.at("tensors");
  std::vector<std::string> dims;
  for (const auto& d : j.at("dims")) dims.push_back(d.at("name").get<std::string>());
  std::string source = fmt::format("KernelBench level {} problem {}: {}", level, kb.number, o.file.filename().string());
  bool half = false;
  std::vector<std::string> flops, bytes;
  for (const auto& t : tensors) {
    std::string dtype = t.at("dtype").get<std::string>();
    if (t.at("role") == "output") {
      half = half || dtype == "f16" || dtype == "bf16";
      flops.push_back(element_expr(t));
    }
    bytes.push_back(fmt::format("{} * {}", dtype_bytes(dtype), element_expr(t)));
  }
  Rendered r;
  std::string& s = r.op_toml;
  s += fmt::format("# Imported by `kope ops import kernelbench` from {}. The trusted reference is\n", o.file.filename().string());
  s += "# reference.py, the problem's PyTorch model run by the trusted runner (docs/design.md §2, \"PyTorch\n";
  s += "# references\"). The model's parameters are inputs after the forward arguments; the module's\n";
  s += "# other constants are attrs. Cases: the original size (timed where it fits) and scaled and\n";
  s += "# odd-sized variants of the data dims.\n";
  s += fmt::format("name = {}\ncategory = {}\nlevel = {}\n", toml_string(name), toml_string(category), level);
  s += fmt::format("summary = {}\n", toml_string(fmt::format("{} (KernelBench level {}), the PyTorch model of reference.py on the CPU.", kb.title, level)));
  s += fmt::format("source = {}\nreference = \"reference.py\"\n", toml_string(source));
  s += fmt::format("dims = {}\n", toml_names(dims));
  auto tensor_list = [&](const char* key, std::initializer_list<std::string_view> roles) {
    s += fmt::format("{} = [\n", key);
    for (const auto& t : tensors) {
      if (std::find(roles.begin(), roles.end(), t.at("role").get<std::string>()) != roles.end()) s += tensor_line(t) + "\n";
    }
    s += "]\n";
  };
  tensor_list("inputs", {"input", "param"});  // the forward arguments, then the parameters
  tensor_list("outputs", {"output"});
  s += "attrs = [\n";
  for (const auto& a : j.at("attrs")) {
    std::string dtype = a.at("dtype").get<std::string>();
    std::string value = dtype == "bool" ? (a.at("value").get<bool>() ? "true" : "false") : a.at("value").dump();
    if (dtype == "f32" && value.find_first_of(".eE") == std::string::npos) value += ".0";
    s += fmt::format("  {{ name = {}, dtype = {}, value = {} }},\n", toml_string(a.at("name").get<std::string>()), toml_string(dtype), value);
  }
  s += "]\n";
  // The matrix products' and convolutions' multiply-adds, counted while the model ran each case
  // (two flops each), then one per output element (the least any algorithm does): without the
  // products a matmul or a convolution reads as memory-bound, at a few percent of its roof.
  std::vector<std::string> products;
  for (const auto& t : j.value("product_terms", json::array())) {
    auto coef = t.at("coef").get<std::vector<int64_t>>();
    std::vector<std::string> factors;
    if (coef.at(0) != 1 || t.at("dims").empty()) factors.push_back(std::to_string(coef.at(0)));
    for (const auto& d : t.at("dims")) {
      for (int64_t k = 0; k < d.at(1).get<int64_t>(); ++k) factors.push_back(d.at(0).get<std::string>());
    }
    std::string term = util::join(factors, " * ");
    if (coef.at(1) != 1) term = fmt::format("{} / {}", term, coef.at(1));
    products.push_back(term);
  }
  if (!products.empty()) {
    s += fmt::format("# Matrix products and convolutions, two per multiply-add (counted while the model ran every case),\n"
                     "# then one per output element.\nflops = {}\n",
                     toml_string(util::join(products, " + ") + " + " + util::join(flops, " + ")));
  } else {
    std::string why = j.value("products_note", "");
    if (!why.empty()) s += fmt::format("# No count of the matrix products' flops: {}.\n", why);
    s += fmt::format("flops = {}  # one per output element: the least any algorithm does\n", toml_string(util::join(flops, " + ")));
  }
  s += fmt::format("bytes = {}\n", toml_string(util::join(bytes, " + ")));
  s += half ? "# bf16/f16 outputs: the storage format's rounding dominates.\ntolerance = { atol = 1e-2, rtol = 1e-2 }\n"
            : "# PyTorch and a kernel may sum in different orders.\ntolerance = { atol = 1e-3, rtol = 1e-3 }\n";
  // Smallest first; the original last, timed when it fits.
  std::vector<std::pair<uint64_t, std::string>> cases;
  for (const auto& c : j.at("cases")) {
    uint64_t b = case_bytes(tensors, c.at("dims"));
    bool original = c.at("label") == "original";
    if (b > (original ? k_timed_case_bytes : k_checked_case_bytes)) continue;
    std::vector<std::string> kv;
    for (const auto& d : dims) kv.push_back(fmt::format("{} = {}", d, c.at("dims").at(d).get<int64_t>()));
    if (original) kv.emplace_back("timed = true");
    cases.emplace_back(original ? UINT64_MAX : b, fmt::format("  {{ {} }},  # {}", util::join(kv, ", "), c.at("label").get<std::string>()));
  }
  std::stable_sort(cases.begin(), cases.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  s += "cases = [\n";
  for (const auto& c : cases) s += c.second + "\n";
  s += "]\n";

  std::string& p = r.reference_py;
  p = problem;
  if (!p.empty() && p.back() != '\n') p += '\n';
  json dim_constants = j.at("dim_constants");
  p += "\n\n# ---- kope " + std::string(88, '-') + "\n";
  p += fmt::format("# Written by `kope ops import kernelbench` from {}: the op's trusted reference\n", o.file.filename().string());
  p += "# (docs/design.md §2, \"PyTorch references\"). kope_reference(dims, attrs) builds the model of a\n";
  p += "# case: the problem above is executed again with its size constants set from the case's dims\n";
  p += "# (constants computed from them follow); the model's parameters are the op's inputs after the\n";
  p += "# forward arguments, generated by kope, so every kernel is given them.\n";
  p += fmt::format("_KOPE_DIM_CONSTANTS = {}\n", dim_constants.dump());
  p += fmt::format("_KOPE_FORWARD_ARGS = {}\n", j.at("forward_args").get<int>());
  p += fmt::format("_KOPE_PARAMETERS = {}\n\n", j.at("parameters").dump());
  p += kernelbench_scripts::k_problem;
  p += R"PY(

def kope_reference(dims, attrs):
    try:
        from torch.func import functional_call
    except ImportError:  # torch < 2.0
        from torch.nn.utils.stateless import functional_call
    ns = kope_problem(__kope_source__, __file__, {c: dims[d] for d, c in _KOPE_DIM_CONSTANTS.items()})
    model = ns["Model"](*ns["get_init_inputs"]())
    names = [n for n, _ in model.named_parameters()]
    if names != _KOPE_PARAMETERS:
        raise RuntimeError("the model's parameters are %s; op.toml expects %s" % (names, _KOPE_PARAMETERS))

    def forward(*tensors):
        args = tensors[:_KOPE_FORWARD_ARGS]
        params = dict(zip(_KOPE_PARAMETERS, tensors[_KOPE_FORWARD_ARGS:]))
        return functional_call(model, params, args) if params else model(*args)

    return forward
)PY";
  r.readme_line = fmt::format("- `{}/{}` ({}, level {}): {}", category, name, kb.title, level, source);
  return r;
}

// Adds or replaces the op's line in the suite's README.md.
Status update_readme(const fs::path& out, const std::string& name_key, const std::string& line) {
  fs::path path = out / "README.md";
  std::string text;
  if (auto t = util::read_file(path)) {
    text = *t;
  } else {
    text = "# KernelBench problems\n\nImported with `kope ops import kernelbench FILE.py --out " + out.filename().string() +
           "`; each op's reference is the problem's PyTorch model (reference.py).\n\n";
  }
  std::vector<std::string> lines;
  bool replaced = false;
  for (auto& l : util::split(text, '\n')) {
    if (l.starts_with("- `" + name_key + "`")) {
      lines.push_back(line);
      replaced = true;
    } else {
      lines.push_back(l);
    }
  }
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (!replaced) lines.push_back(line);
  return util::write_file_atomic(path, util::join(lines, "\n") + "\n");
}

}  // namespace

KernelbenchName parse_kernelbench_name(const fs::path& file) {
  KernelbenchName n;
  std::string parent = file.parent_path().filename().string();
  if (parent.starts_with("level") && parent.size() > 5 && std::all_of(parent.begin() + 5, parent.end(), ::isdigit)) {
    n.level = std::stoi(parent.substr(5));
  }
  std::string stem = file.stem().string();
  size_t digits = 0;
  while (digits < stem.size() && std::isdigit(static_cast<unsigned char>(stem[digits]))) ++digits;
  if (digits > 0 && digits < 7 && digits < stem.size() && stem[digits] == '_') {
    n.number = std::stoi(stem.substr(0, digits));
    n.title = stem.substr(digits + 1);
  } else {
    n.title = stem;
  }
  while (!n.title.empty() && n.title.back() == '_') n.title.pop_back();
  return n;
}

Result<spec::OpSpec> import_kernelbench(const KernelbenchImport& o) {
  KernelbenchName kb = parse_kernelbench_name(o.file);
  int level = o.level > 0 ? o.level : std::max(kb.level, 1);
  if (level > 4) return fail(ErrorKind::config, "{}: level {} is beyond kope's 1..4", o.file.string(), level);
  std::string name = o.name;
  if (name.empty()) name = fmt::format("kb{}_{}_{}", level, kb.number, lower_identifier(kb.title).substr(0, 40));
  std::string category = o.category.empty() ? guess_category(kb.title, level) : o.category;
  fs::path dir = o.out / category / name;
  std::error_code ec;
  if (fs::exists(dir / "op.toml", ec) && !o.overwrite) {
    return fail(ErrorKind::config, "{} exists already (--overwrite replaces it)", dir.string());
  }
  KOPE_ASSIGN(PythonEmbed py, python_embed());  // torch present: fail before the sandbox starts
  (void)py;
  KOPE_ASSIGN(std::string problem, util::read_file(o.file));
  KOPE_ASSIGN(json facts, introspect(o.file));
  Rendered r = render(o, kb, name, category, level, problem, facts);
  KOPE_TRY(util::make_dirs(dir));
  KOPE_TRY(util::write_file_atomic(dir / "op.toml", r.op_toml));
  KOPE_TRY(util::write_file_atomic(dir / "reference.py", r.reference_py));
  KOPE_ASSIGN(spec::OpSpec op, spec::load_op(dir));
  KOPE_TRY(update_readme(o.out, category + "/" + name, r.readme_line));
  return op;
}

}  // namespace kope::eval

#include "eval/pytorch_reference.h"

#include <algorithm>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "util/fs.h"
#include "util/strings.h"
#include "util/subprocess.h"

namespace kope::eval {

namespace {

using json = nlohmann::json;

// Bumped when the harness or the bridge changes, so cached builds are made again.
constexpr const char* k_bridge_version = "kope-pytorch-bridge-1";

// kope's side of a PyTorch reference, run by the embedded Python. `kope_harness(manifest,
// source)` executes reference.py and returns the function kope_entry calls with the buffer
// addresses and the call's dims (then per-case attrs as 64-bit patterns). reference.py defines
// `kope_reference(dims, attrs)`, which returns a callable: given the inputs as tensors (then
// each inout's current contents) it returns the outputs (then each inout's new contents).
// reference.py also sees `__kope_source__`, its own text.
constexpr const char* k_harness = R"PY(
import ctypes, json, math, os, struct
import torch

_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
           "bool": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i16": torch.int16,
           "f16": torch.float16, "bf16": torch.bfloat16}
_FUNCS = {"min": min, "max": max, "cdiv": lambda a, b: -(-a // b), "sqrt": math.sqrt,
          "exp": math.exp, "log": math.log, "pow": pow}


class _Harness:
    def __init__(self, manifest, source):
        self.m = json.loads(manifest)
        torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1"))))
        # __kope_source__: the reference's own text, for references that execute it again
        # (an imported KernelBench problem does, once per case's sizes).
        ns = {"__name__": "kope_reference", "__file__": self.m["file"], "__kope_source__": source}
        exec(compile(source, self.m["file"], "exec"), ns)
        self.make = ns.get("kope_reference")
        if not callable(self.make):
            raise RuntimeError(self.m["file"] + " defines no function kope_reference(dims, attrs)")
        self.models = {}
        self.views = {}

    def _view(self, addr, t, env):
        shape = tuple(int(eval(e, {"__builtins__": {}}, env)) for e in t["shape"])
        key = (addr, t["dtype"], shape)
        v = self.views.get(key)
        if v is None:
            dtype = _DTYPES[t["dtype"]]
            n = math.prod(shape)
            if n == 0:
                v = torch.empty(shape, dtype=dtype)
            else:
                size = n * torch.empty((), dtype=dtype).element_size()
                v = torch.frombuffer((ctypes.c_char * size).from_address(addr), dtype=dtype).view(shape)
            if len(self.views) > 512:
                self.views.clear()
            self.views[key] = v
        return v

    def __call__(self, addrs, args):
        m = self.m
        dims = dict(zip(m["dims"], args))
        attrs = dict(m["attrs"])
        for i, (name, is_float) in enumerate(m["case_attrs"]):
            bits = args[len(m["dims"]) + i]
            attrs[name] = struct.unpack("<d", struct.pack("<q", bits))[0] if is_float else bits
        key = tuple(args)
        fn = self.models.get(key)
        if fn is None:
            torch.manual_seed(0)  # anything the model draws is the same in every process
            fn = self.make(dict(dims), dict(attrs))
            self.models[key] = fn
        env = dict(_FUNCS)
        env.update(dims)
        tensors = [self._view(a, t, env) for a, t in zip(addrs, m["tensors"])]
        with torch.no_grad():
            res = fn(*[tensors[i] for i in m["args"]])
        if isinstance(res, torch.Tensor):
            res = (res,)
        res = tuple(res)
        outs = m["results"]
        if len(res) != len(outs):
            raise RuntimeError("%s returned %d tensors; op.toml has %d outputs and inouts" % (m["file"], len(res), len(outs)))
        for slot, r in zip(outs, res):
            o = tensors[slot]
            if not isinstance(r, torch.Tensor) or r.numel() != o.numel():
                raise RuntimeError("%s: output %s is %s; op.toml says shape %s" % (
                    m["file"], m["tensors"][slot]["name"], tuple(r.shape) if isinstance(r, torch.Tensor) else type(r).__name__,
                    tuple(o.shape)))
            o.copy_(r.reshape(o.shape))


def kope_harness(manifest, source):
    return _Harness(manifest, source)
)PY";

// The bridge's C++: Python started on the first call (the runner loads the object long
// before), libpython promoted to the global scope first because extension modules such as
// torch._C resolve the interpreter's symbols globally and the runner dlopens kernels
// RTLD_LOCAL. A Python exception prints its traceback to stderr and aborts: the runner's death
// is how a failing reference reaches the parent (eval/session.h).
constexpr const char* k_bridge = R"CPP(
namespace {

PyObject* g_call = nullptr;

[[noreturn]] void die(const char* what) {
  if (PyErr_Occurred()) PyErr_Print();
  std::fprintf(stderr, "kope: the PyTorch reference %s\n", what);
  std::fflush(stderr);
  std::abort();
}

void start_python() {
  if (dlopen(k_libpython, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) == nullptr) die("cannot make libpython global");
  PyConfig config;
  PyConfig_InitIsolatedConfig(&config);  // no PYTHON* variables, no user site, no bytecode written
  config.write_bytecode = 0;
  config.install_signal_handlers = 0;  // the runner's handlers stay
  PyConfig_SetBytesString(&config, &config.program_name, k_python);
  PyStatus st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) die("cannot start Python");
  PyObject* ns = PyDict_New();
  PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins());
  PyObject* r = PyRun_String(k_harness, Py_file_input, ns, ns);
  if (r == nullptr) die("harness failed to start (is python3-torch installed?)");
  Py_DECREF(r);
  PyObject* make = PyDict_GetItemString(ns, "kope_harness");
  g_call = make ? PyObject_CallFunction(make, "ss", k_manifest, k_reference) : nullptr;
  if (g_call == nullptr) die("failed to load");
  PyEval_SaveThread();  // every call takes the GIL itself, from whichever thread
}

}  // namespace

extern "C" void kope_entry(void* const* buffers, const int64_t* dims) {
  static std::once_flag once;
  std::call_once(once, start_python);
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* addrs = PyTuple_New(k_buffers);
  for (int i = 0; i < k_buffers; ++i) PyTuple_SET_ITEM(addrs, i, PyLong_FromVoidPtr(buffers[i]));
  PyObject* args = PyTuple_New(k_args);
  for (int i = 0; i < k_args; ++i) PyTuple_SET_ITEM(args, i, PyLong_FromLongLong(dims[i]));
  PyObject* r = PyObject_CallFunctionObjArgs(g_call, addrs, args, nullptr);
  if (r == nullptr) die("failed");
  Py_DECREF(r);
  Py_DECREF(args);
  Py_DECREF(addrs);
  PyGILState_Release(gil);
}
)CPP";

// `text` as a C++ string literal, one literal per line so the generated file stays readable.
std::string c_literal(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n\"\n    \""; break;
      case '\t': out += "\\t"; break;
      case '?': out += "\\?"; break;  // no trigraphs
      default:
        if (c < 0x20 || c >= 0x7f) {
          out += fmt::format("\\{:03o}", c);
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// What the harness needs to know of the op: every buffer's name, dtype and shape expressions
// (inputs then outputs, as the runner passes them), the dims' order, the attrs, and which
// buffers are the callable's arguments and results.
json bridge_manifest(const spec::OpSpec& op) {
  json m;
  m["file"] = op.reference_path.string();
  m["dims"] = op.dims;
  json tensors = json::array();
  auto add = [&](const spec::Tensor& t) {
    json shape = json::array();
    for (const auto& e : t.shape) shape.push_back(e.text());
    tensors.push_back({{"name", t.name}, {"dtype", std::string(spec::dtype_name(t.dtype))}, {"shape", shape}});
  };
  for (const auto& t : op.inputs) add(t);
  for (const auto& t : op.outputs) add(t);
  m["tensors"] = tensors;
  json args = json::array(), results = json::array();
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    if (!op.inputs[i].inout) args.push_back(i);
  }
  for (size_t o = 0; o < op.outputs.size(); ++o) {
    if (op.outputs[o].inout) args.push_back(op.inputs.size() + o);  // an inout's current contents
    results.push_back(op.inputs.size() + o);
  }
  m["args"] = args;
  m["results"] = results;
  json attrs = json::object(), case_attrs = json::array();
  for (const auto& a : op.attrs) {
    bool is_float = spec::dtype_is_float(a.dtype);
    if (a.per_case) case_attrs.push_back({a.name, is_float});
    attrs[a.name] = is_float ? json(a.value) : json(a.ivalue);
  }
  m["attrs"] = attrs;
  m["case_attrs"] = case_attrs;
  return m;
}

Result<std::string> ask_python(const std::string& code) {
  util::RunOptions ro;
  ro.spawn.argv = {python_executable(), "-I", "-c", code};
  ro.timeout = std::chrono::seconds(120);
  ro.stderr_cap = 16 << 10;
  auto r = util::run(ro);
  if (!r) return fail(ErrorKind::unavailable, "cannot run {}: {}", python_executable(), r.error().message);
  if (!r->status.success()) {
    return fail(ErrorKind::unavailable, "{} {}: {}", python_executable(), r->status.describe(), util::truncate_text(r->err, 600, 6));
  }
  return r->out;
}

}  // namespace

bool has_pytorch_reference(const spec::OpSpec& op) { return op.reference_path.extension() == ".py"; }

std::string python_executable() { return util::get_env("KOPE_PYTHON").value_or("/usr/bin/python3"); }

Result<PythonEmbed> python_embed() {
  static std::mutex mu;
  static std::optional<Result<PythonEmbed>> cached;
  std::lock_guard lock(mu);
  if (cached) return *cached;
  auto probe = [&]() -> Result<PythonEmbed> {
    KOPE_ASSIGN(std::string out, ask_python("import sysconfig as s\n"
                                            "print(s.get_config_var('VERSION'))\n"
                                            "print(s.get_paths()['include'])\n"
                                            "print(s.get_config_var('LIBDIR'))\n"
                                            "print(s.get_config_var('INSTSONAME'))\n"
                                            "try:\n import torch\n print(torch.__version__)\n"
                                            "except ImportError:\n print('')\n"));
    auto lines = util::split(out, '\n');
    if (lines.size() < 5) return fail(ErrorKind::unavailable, "{} answered '{}' about itself", python_executable(), out);
    PythonEmbed py;
    py.version = std::string(util::trim(lines[0]));
    py.soname = std::string(util::trim(lines[3]));
    py.torch_version = std::string(util::trim(lines[4]));
    fs::path include(std::string(util::trim(lines[1]))), libdir(std::string(util::trim(lines[2])));
    std::error_code ec;
    if (!fs::exists(include / "Python.h", ec) || !fs::exists(libdir / py.soname, ec)) {
      return fail(ErrorKind::unavailable, "{} cannot be embedded: no {} or {} (apt-get install libpython{}-dev)", python_executable(),
                  (include / "Python.h").string(), (libdir / py.soname).string(), py.version);
    }
    if (py.torch_version.empty()) {
      return fail(ErrorKind::unavailable, "{} has no torch, which PyTorch references need (apt-get install python3-torch)",
                  python_executable());
    }
    py.flags = {"-I" + include.string(), "-L" + libdir.string(), "-Wl,-rpath," + libdir.string(), "-lpython" + py.version, "-ldl"};
    return py;
  };
  cached = probe();
  return *cached;
}

std::string render_pytorch_bridge(const spec::OpSpec& op, std::string_view reference_source, const PythonEmbed& py) {
  std::string out = fmt::format("// The PyTorch reference of {} ({}), generated by kope (eval/pytorch_reference.cpp).\n", op.name,
                                op.reference_path.string());
  out += "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n#include <dlfcn.h>\n#include <cstdint>\n#include <cstdio>\n";
  out += "#include <cstdlib>\n#include <mutex>\n\n";
  out += fmt::format("static const char* const k_python = {};\n", c_literal(python_executable()));
  out += fmt::format("static const char* const k_libpython = {};\n", c_literal(py.soname));
  out += fmt::format("static const int k_buffers = {};\n", op.inputs.size() + op.outputs.size());
  out += fmt::format("static const int k_args = {};\n", op.dims.size() + static_cast<size_t>(std::count_if(op.attrs.begin(), op.attrs.end(), [](const spec::Attr& a) {
                                                        return a.per_case;
                                                      })));
  out += fmt::format("static const char* const k_manifest = {};\n", c_literal(bridge_manifest(op).dump()));
  out += fmt::format("static const char* const k_harness =\n    {};\n", c_literal(k_harness));
  out += fmt::format("static const char* const k_reference =\n    {};\n", c_literal(reference_source));
  return out + k_bridge;
}

Result<fs::path> build_pytorch_reference(const spec::OpSpec& op, const Toolchain& tc) {
  KOPE_ASSIGN(PythonEmbed py, python_embed());
  KOPE_ASSIGN(std::string source, util::read_file(op.reference_path));
  std::string bridge = render_pytorch_bridge(op, source, py);
  std::vector<TrustedSource> sources = {{fs::path(), "pytorch_reference.cpp", bridge}};
  // The bridge embeds the reference and the harness; the Python and torch versions are what
  // it runs with.
  std::string key = fmt::format("{}\n{}\n{} torch {}\n{}", k_bridge_version, python_executable(), py.version, py.torch_version, bridge);
  return compile_trusted(key, sources, tc, py.flags);
}

}  // namespace kope::eval

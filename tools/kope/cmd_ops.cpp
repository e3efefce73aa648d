// `kope ops list|show|check`: the operator suite and user op folders.
#include <nlohmann/json.hpp>

#include "cli.h"
#include "cli_json.h"
#include "eval/kernelbench.h"
#include "eval/pytorch_reference.h"
#include "kope/spec.h"
#include "spec/generate.h"
#include "spec/scaffold.h"
#include "util/strings.h"

namespace kope::cli {

namespace {

using nlohmann::json;

json tensor_json(const spec::Tensor& t, bool input) {
  json j;
  j["name"] = t.name;
  j["dtype"] = std::string(spec::dtype_name(t.dtype));
  json shape = json::array();
  for (const auto& e : t.shape) shape.push_back(e.text());
  j["shape"] = shape;
  if (input) j["init"] = t.init ? t.init->text : spec::default_init(t.dtype).text;
  if (t.tolerance) {
    json tol = json::object();
    if (t.tolerance->atol) tol["atol"] = t.tolerance->atol->text();
    if (t.tolerance->rtol) tol["rtol"] = t.tolerance->rtol->text();
    j["tolerance"] = tol;
  }
  return j;
}

}  // namespace

json op_summary_json(const spec::OpSpec& op) {
  json j;
  j["name"] = op.name;
  j["category"] = op.category;
  j["level"] = op.level;
  j["summary"] = op.summary;
  j["cases"] = op.cases.size();
  j["timed_cases"] = op.timed_case_count();
  j["library"] = op.library_path ? json(op.library_name) : json(nullptr);
  j["dir"] = op.dir.string();
  j["reference"] = op.reference_path.filename().string();
  return j;
}

json op_json(const spec::OpSpec& op) {
  json j = op_summary_json(op);
  j["dims"] = op.dims;
  json ins = json::array(), outs = json::array(), attrs = json::array();
  json inouts = json::array();
  for (const auto& t : op.inputs) {
    if (!t.inout) ins.push_back(tensor_json(t, true));
  }
  for (const auto& t : op.outputs) (t.inout ? inouts : outs).push_back(tensor_json(t, t.inout));  // an inout has an init
  for (const auto& a : op.attrs) {
    json ja{{"name", a.name}, {"dtype", std::string(spec::dtype_name(a.dtype))}};
    if (spec::dtype_is_float(a.dtype)) {
      ja["value"] = a.value;
    } else {
      ja["value"] = a.ivalue;
    }
    attrs.push_back(ja);
  }
  j["inputs"] = ins;
  j["outputs"] = outs;
  if (!inouts.empty()) j["inouts"] = inouts;
  j["attrs"] = attrs;
  j["flops"] = op.flops.text();
  j["bytes"] = op.bytes.text();
  j["tolerance"] = {{"atol", op.tolerance.atol}, {"rtol", op.tolerance.rtol}};
  json cases = json::array();
  for (const auto& c : op.cases) {
    json jc;
    for (size_t i = 0; i < op.dims.size(); ++i) jc[op.dims[i]] = c.dims[i];
    for (size_t a = 0; a < op.attrs.size(); ++a) {  // the attrs a case sets (format v2)
      if (!op.attrs[a].per_case) continue;
      const auto& v = c.attrs[a];
      jc[v.name] = spec::dtype_is_float(v.dtype) ? json(v.value) : json(v.ivalue);
    }
    jc["timed"] = c.timed;
    jc["buffer_bytes"] = op.case_buffer_bytes(c);
    jc["flops"] = op.flops_for(c);
    jc["bytes"] = op.bytes_for(c);
    cases.push_back(jc);
  }
  j["case_list"] = cases;
  j["signature"] = spec::render_signature(op);
  j["spec_hash"] = op.spec_hash;
  return j;
}

namespace {

std::string op_text(const spec::OpSpec& op) {
  std::string out;
  out += fmt::format("{}  ({}, level {})\n", op.name, op.category, op.level);
  if (!op.summary.empty()) out += fmt::format("  {}\n", op.summary);
  out += fmt::format("  folder:    {}\n", op.dir.string());
  out += fmt::format("  reference: {}{}\n", op.reference_path.filename().string(),
                     eval::has_pytorch_reference(op) ? " (a PyTorch model, run by the trusted runner)" : "");
  out += fmt::format("  dims:      {}\n", util::join(op.dims, ", "));
  auto shape = [](const spec::Tensor& t) {
    std::vector<std::string> s;
    for (const auto& e : t.shape) s.push_back(e.text());
    return util::join(s, ", ");
  };
  auto init = [](const spec::Tensor& t) { return t.init ? t.init->text : spec::default_init(t.dtype).text; };
  for (const auto& t : op.inputs) {
    if (!t.inout) out += fmt::format("  input      {} {}[{}]  init {}\n", t.name, spec::dtype_name(t.dtype), shape(t), init(t));
  }
  for (const auto& t : op.outputs) {
    out += fmt::format("  {:<10} {} {}[{}]", t.inout ? "inout" : "output", t.name, spec::dtype_name(t.dtype), shape(t));
    if (t.inout) out += fmt::format("  init {}", init(t));
    if (t.tolerance) {
      out += fmt::format("  tolerance atol {} rtol {}", t.tolerance->atol ? t.tolerance->atol->text() : "(op's)",
                         t.tolerance->rtol ? t.tolerance->rtol->text() : "(op's)");
    }
    out += "\n";
  }
  for (const auto& a : op.attrs) {
    out += fmt::format("  attr       {} {} = {}\n", a.name, spec::dtype_name(a.dtype),
                       spec::dtype_is_float(a.dtype) ? fmt::format("{}", a.value) : std::to_string(a.ivalue));
  }
  out += fmt::format("  flops:     {}\n  bytes:     {}\n", op.flops.text(), op.bytes.text());
  out += fmt::format("  tolerance: atol {} rtol {}\n", op.tolerance.atol, op.tolerance.rtol);
  out += fmt::format("  library:   {}\n", op.library_path ? fmt::format("{} baseline ({})", op.library_name, op.library_path->filename().string())
                                                         : std::string("none (no oneDNN/OpenBLAS primitive covers this op)"));
  out += fmt::format("  cases:     {} ({} timed)\n", op.cases.size(), op.timed_case_count());
  for (const auto& c : op.cases) {
    out += fmt::format("    #{:<3} {:<40} {:>10}  {:>9.3g} flop{}\n", c.index + 1, op.case_label(c),
                       util::human_bytes(static_cast<double>(op.case_buffer_bytes(c))), op.flops_for(c), c.timed ? "  timed" : "");
  }
  out += fmt::format("  signature:\n    {}\n", spec::render_signature(op));
  return out;
}

spec::fs::path suite_root(const std::string& dir) { return dir.empty() ? spec::default_ops_dir() : spec::fs::path(dir); }

// `kope ops import kernelbench FILE.py`: a KernelBench problem as an op folder (eval/kernelbench.h).
void add_import(CLI::App* ops, Action& action) {
  auto* imp = ops->add_subcommand("import", "Import a problem of a peer benchmark as an op folder");
  imp->require_subcommand(1);
  auto* kb = imp->add_subcommand("kernelbench", "A KernelBench problem (class Model, get_inputs, get_init_inputs) with a PyTorch reference");
  struct ImportOptions {
    std::string file;
    std::string out = "ops";
    eval::KernelbenchImport request;
  };
  auto o = std::make_shared<ImportOptions>();
  kb->add_option("file", o->file, "The problem's .py file (e.g. KernelBench/level1/19_ReLU.py)")->required();
  kb->add_option("--out", o->out, "Suite root the op folder goes under, as <out>/<category>/<name>")->capture_default_str();
  kb->add_option("--name", o->request.name, "The op's name (default: kb<level>_<number>_<title>)");
  kb->add_option("--category", o->request.category, "Its category (default: guessed from the title; level 2 and up: fused)");
  kb->add_option("--level", o->request.level, "Its level 1..4 (default: from a levelN folder, else 1)")->check(CLI::Range(1, 4));
  kb->add_flag("--overwrite", o->request.overwrite, "Replace an existing op folder");
  kb->callback([&action, o] {
    action = [o]() -> Result<int> {
      eval::KernelbenchImport request = o->request;
      request.file = o->file;
      request.out = o->out;
      KOPE_ASSIGN(spec::OpSpec op, eval::import_kernelbench(request));
      print(fmt::format("imported {} as {} ({} cases, {} timed): {}\n", o->file, op.dir.string(), op.cases.size(),
                        op.timed_case_count(), spec::render_signature(op)));
      return 0;
    };
  });
}

}  // namespace

void register_ops(CLI::App& app, Action& action) {
  auto* ops = app.add_subcommand("ops", "List, show and check operator specs");
  ops->require_subcommand(1);

  auto* list = ops->add_subcommand("list", "List the operators of the suite");
  struct ListOptions {
    bool json = false;
    std::string suite_dir;
  };
  auto lo = std::make_shared<ListOptions>();
  list->add_flag("--json", lo->json, "Print a JSON array");
  list->add_option("--suite", lo->suite_dir, "Suite root (default: the built-in ops/)");
  list->callback([&action, lo] {
    action = [lo]() -> Result<int> {
      const auto& suite_dir = lo->suite_dir;
      const bool list_json = lo->json;
      KOPE_ASSIGN(spec::Suite suite, spec::load_suite(suite_dir.empty() ? spec::default_ops_dir() : spec::fs::path(suite_dir)));
      if (list_json) {
        json arr = json::array();
        for (const auto& op : suite.ops) arr.push_back(op_summary_json(op));
        print(arr.dump(2) + "\n");
        return 0;
      }
      std::string out = fmt::format("{:<28} {:<15} {:>5} {:>6} {:>6}  {}\n", "name", "category", "level", "cases", "timed", "library");
      for (const auto& op : suite.ops) {
        out += fmt::format("{:<28} {:<15} {:>5} {:>6} {:>6}  {}\n", op.name, op.category, op.level, op.cases.size(),
                           op.timed_case_count(), op.library_path ? op.library_name : "-");
      }
      out += fmt::format("{} operators\n", suite.ops.size());
      print(out);
      return 0;
    };
  });

  auto* show = ops->add_subcommand("show", "Show one operator: spec, cases, kernel signature");
  struct ShowOptions {
    std::string op;
    bool json = false;
    bool signature = false;
    std::string suite_dir;
  };
  auto so = std::make_shared<ShowOptions>();
  show->add_option("op", so->op, "Suite op name or path to an op folder")->required();
  show->add_flag("--json", so->json, "Print JSON");
  show->add_flag("--signature", so->signature, "Print only the kernel signature (CPU C++ ABI v1)");
  show->add_option("--suite", so->suite_dir, "Suite root the name is looked up in (default: the built-in ops/)");
  show->callback([&action, so] {
    action = [so]() -> Result<int> {
      KOPE_ASSIGN(spec::OpSpec op, spec::resolve_op(so->op, suite_root(so->suite_dir)));
      if (so->json) {
        json j = op_json(op);
        print(j.dump(2) + "\n");
      } else if (so->signature) {
        print(spec::render_signature(op) + "\n");
      } else {
        print(op_text(op));
      }
      return 0;
    };
  });

  auto* create = ops->add_subcommand("new", "Create an op folder to start from: a commented op.toml and a reference.cpp that compiles");
  struct NewOptions {
    std::string name;
    std::string category;
    std::string dir = "ops";
  };
  auto no = std::make_shared<NewOptions>();
  create->add_option("name", no->name, "The op's name (letters, digits, '_' or '-')")->required();
  create->add_option("--category", no->category, "Its category (e.g. elementwise, matmul, data-movement)")->required();
  create->add_option("--dir", no->dir, "Suite root the folder goes under, as <dir>/<category>/<name>")->capture_default_str();
  create->callback([&action, no] {
    action = [no]() -> Result<int> {
      KOPE_ASSIGN(spec::fs::path dir, spec::create_op_folder(no->dir, no->name, no->category));
      print(fmt::format("created {}/op.toml and reference.cpp (y = x); `kope ops show {}` prints its signature\n", dir.string(),
                        dir.string()));
      return 0;
    };
  });

  auto* check = ops->add_subcommand("check", "Validate op specs (the whole suite, or the given ops/folders)");
  struct CheckOptions {
    std::vector<std::string> selectors;
    std::string suite_dir;
  };
  auto co = std::make_shared<CheckOptions>();
  check->add_option("ops", co->selectors, "Op names, globs, categories or folders");
  check->add_option("--suite", co->suite_dir, "Suite root (default: the built-in ops/)");
  check->callback([&action, co] {
    action = [co]() -> Result<int> {
      KOPE_ASSIGN(std::vector<spec::OpSpec> selected, spec::select_ops(co->selectors, suite_root(co->suite_dir)));
      size_t cases = 0;
      for (const auto& op : selected) cases += op.cases.size();
      print(fmt::format("{} operator specs valid, {} cases\n", selected.size(), cases));
      return 0;
    };
  });

  add_import(ops, action);
}

}  // namespace kope::cli

# kope's introspection of a KernelBench problem (eval/kernelbench.h). Trusted code, run by
# `kope ops import kernelbench` in a sandbox with torch: it executes the problem file, learns
# its tensors (inputs, the model's parameters, outputs), which module constants are dims (a
# constant is a dim when changing it by one moves axes that equal it along with it), runs the
# scaled and odd-sized variants, and prints one JSON object. A problem kope cannot take is
# refused with {"error": what, "line": n}.
import ast, inspect, json, math, sys, traceback

PATH, SHOWN = sys.argv[1], sys.argv[2]
torch = None  # imported once the file is known to be a problem (a refusal is quicker without it)
DTYPES = {}
# Variants of the size constants kope checks besides the original: name, rule.
VARIANTS = [("tiny", lambda v: max(1, v // 64)), ("odd", lambda v: max(1, v // 16) | 1),
            ("quarter", lambda v: max(1, v // 4)), ("odd-large", lambda v: max(1, v // 2 - 1) | 1)]


class Refused(Exception):
    def __init__(self, line, what):
        super().__init__(what)
        self.line, self.what = line, what


def read_problem():
    source = open(PATH).read()
    try:
        tree = ast.parse(source, SHOWN)
    except SyntaxError as e:
        raise Refused(e.lineno or 0, "syntax error: " + str(e.msg))
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.ClassDef, ast.FunctionDef)):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                found[node.name] = node
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a docstring
        if isinstance(node, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets):
            continue
        raise Refused(node.lineno, "unsupported top-level statement (%s): a KernelBench problem holds imports, "
                      "constants, class Model, get_inputs and get_init_inputs" % type(node).__name__)
    consts = kope_constants(tree)
    model = found.get("Model")
    if not isinstance(model, ast.ClassDef):
        raise Refused(0, "no class Model(nn.Module)")
    if not any(ast.unparse(b).endswith("Module") for b in model.bases):
        raise Refused(model.lineno, "class Model must derive from nn.Module")
    methods = {n.name for n in model.body if isinstance(n, ast.FunctionDef)}
    for m in ("__init__", "forward"):
        if m not in methods:
            raise Refused(model.lineno, "class Model has no %s method" % m)
    for f in ("get_inputs", "get_init_inputs"):
        if not isinstance(found.get(f), ast.FunctionDef):
            raise Refused(0, "no function %s()" % f)
    return source, tree, consts, found


def problem_line(exc):
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == SHOWN:
            return frame.lineno
    return 0


# The multiply-adds of the matrix products and convolutions of the last forward() execute()
# ran, in call order: (aten op, flops), two per multiply-add.
LAST_PRODUCTS = []


def product_flops(func, args, out):
    """Two per multiply-add of a matrix product or convolution aten op; None for other ops."""
    name = func.overloadpacket.__name__
    t = [a for a in args if isinstance(a, torch.Tensor)]
    if name in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot"):
        a, b = (t[-2], t[-1])  # addmm(bias, a, b): the last two
        inner = a.shape[-1]
        return 2 * inner * (out.numel() if name != "addbmm" else out.numel() * a.shape[0])
    if name == "convolution":
        x, w = t[0], t[1]
        transposed = bool(args[6]) if len(args) > 6 else False
        # weight: (out, in/groups, k...) or, transposed, (in, out/groups, k...)
        per = math.prod(w.shape[1:])
        return 2 * (x.numel() if transposed else out.numel()) * per
    return None


def counting_products():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                f = product_flops(func, args, out)
                if f:
                    LAST_PRODUCTS.append((func.overloadpacket.__name__, int(f)))
            return out
    return Count()


def execute(source, overrides, forward=True):
    """One run of the problem with some constants set: init args, model, inputs, outputs."""
    ns = kope_problem(source, SHOWN, overrides)
    torch.manual_seed(0)
    init = list(ns["get_init_inputs"]())
    model = ns["Model"](*init)
    inputs = list(ns["get_inputs"]())
    outputs = None
    if forward:
        del LAST_PRODUCTS[:]
        with torch.no_grad(), counting_products():
            outputs = model(*inputs)
        outputs = [outputs] if isinstance(outputs, torch.Tensor) else list(outputs) if isinstance(outputs, (tuple, list)) else outputs
    return init, model, inputs, outputs


def shapes_of(run):
    init, model, inputs, outputs = run
    s = [tuple(t.shape) for t in inputs] + [tuple(p.shape) for _, p in model.named_parameters()]
    if outputs is not None:
        s += [tuple(t.shape) for t in outputs]
    return s


def check_inputs(found, run):
    init, model, inputs, _ = run
    gi, gii = found["get_inputs"].lineno, found["get_init_inputs"].lineno
    for i, v in enumerate(init):
        if not isinstance(v, (int, float, bool, tuple, list, str)) or isinstance(v, torch.Tensor):
            raise Refused(gii, "get_init_inputs() returns a %s at position %d; expected numbers" % (type(v).__name__, i))
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise Refused(gi, "get_inputs() returns a %s at position %d; kope passes only tensors" % (type(t).__name__, i))
        if t.dtype not in DTYPES:
            raise Refused(gi, "input %d has dtype %s, which kope has no dtype for" % (i, t.dtype))


def check_original(found, run):
    init, model, inputs, outputs = run
    if not isinstance(outputs, list) or not outputs or not all(isinstance(t, torch.Tensor) for t in outputs):
        raise Refused(found["Model"].lineno, "forward() must return a tensor or a tuple of tensors")
    for i, t in enumerate(outputs):
        if t.dtype not in DTYPES:
            raise Refused(found["Model"].lineno, "output %d has dtype %s, which kope has no dtype for" % (i, t.dtype))
    buffers = [n for n, _ in model.named_buffers()]
    if buffers:
        raise Refused(found["Model"].lineno, "Model has buffers (%s), state a kernel cannot be given; unsupported" % ", ".join(buffers))
    for n, p in model.named_parameters():
        if p.dtype not in DTYPES:
            raise Refused(found["Model"].lineno, "parameter %s has dtype %s, which kope has no dtype for" % (n, p.dtype))
    before = [t.clone() for t in inputs]
    with torch.no_grad():
        again = model(*inputs)
    again = [again] if isinstance(again, torch.Tensor) else list(again)
    for i, (a, b) in enumerate(zip(inputs, before)):
        if not torch.equal(a, b):
            raise Refused(found["Model"].lineno, "forward() writes into its input %d; kope's inputs are read-only" % i)
    for a, b in zip(outputs, again):
        if not torch.equal(torch.nan_to_num(a.float()), torch.nan_to_num(b.float())):
            raise Refused(found["Model"].lineno, "forward() is not deterministic (dropout or a random op?)")


def c_name(text):
    out = "".join(ch if ch.isalnum() else "_" for ch in text)
    return out if out and not out[0].isdigit() else "t_" + out


def main():
    global torch
    source, tree, consts, found = read_problem()
    import torch
    DTYPES.update({torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
                   torch.int32: "i32", torch.int64: "i64", torch.int16: "i16", torch.int8: "i8",
                   torch.uint8: "u8", torch.bool: "bool"})
    code = source
    try:
        check_inputs(found, execute(code, {}, forward=False))  # what forward() is given, before it runs
        orig = execute(code, {})
        products = {"original": list(LAST_PRODUCTS)}  # before the dim probes run it again
    except Refused:
        raise
    except Exception as e:
        raise Refused(problem_line(e), "running the problem failed: %s: %s" % (type(e).__name__, e))
    check_original(found, orig)
    init, model, inputs, outputs = orig
    base = shapes_of(orig)
    axis_values = {v for s in base for v in s}
    ints = {n: v for n, (v, _) in consts.items() if isinstance(v, int) and not isinstance(v, bool)}
    # A constant is a dim when setting it to v+1 moves axes equal to v to v+1.
    owner = {}  # (tensor index, axis) -> constant
    for name, v in ints.items():
        if v not in axis_values:
            continue
        try:
            probe = shapes_of(execute(code, {name: v + 1}))
        except Exception:
            continue
        if len(probe) != len(base) or any(len(a) != len(b) for a, b in zip(probe, base)):
            continue
        # Axes that follow it exactly are its own; others that move (a convolution's output
        # size) are computed from it and become dims of their own.
        for ti, (a, b) in enumerate(zip(base, probe)):
            for ax, (x, y) in enumerate(zip(a, b)):
                if x == v and y == v + 1:
                    owner.setdefault((ti, ax), name)
    dim_consts = sorted({c for c in owner.values()}, key=lambda c: list(ints).index(c))
    n_in, n_par = len(inputs), len(list(model.named_parameters()))
    data_consts = [c for c in dim_consts if any(ti < n_in or ti >= n_in + n_par for (ti, _), o in owner.items() if o == c)]
    # The cases: the original, then each variant of the data dims that runs.
    runs = [("original", {}, base)]
    for label, rule in VARIANTS:
        over = {c: rule(ints[c]) for c in data_consts}
        if all(over[c] == ints[c] for c in over) or any(over == r[1] for r in runs):
            continue
        try:
            runs.append((label, over, shapes_of(execute(code, over))))
            products[label] = list(LAST_PRODUCTS)
        except Exception:
            pass
    # Dims: the constants' (upper-case names), then one per axis no constant owns.
    dims = [{"name": c.upper().replace(".", "_"), "const": c} for c in dim_consts]
    names = {}
    tensors = []
    forward_args = [p for p in inspect.signature(model.forward).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    params = list(model.named_parameters())
    roles = [("input", forward_args[i].name if i < len(forward_args) else "in%d" % i, t) for i, t in enumerate(inputs)]
    roles += [("param", c_name(n), p) for n, p in params]
    roles += [("output", "out" if len(outputs) == 1 else "out%d" % i, t) for i, t in enumerate(outputs)]
    taken = {d["name"] for d in dims} | {n for n in consts}
    for ti, (role, name, t) in enumerate(roles):
        name = c_name(name)
        while name in taken:
            name += "_"
        taken.add(name)
        shape = []
        for ax in range(t.dim()):
            c = owner.get((ti, ax))
            if c is not None:
                shape.append(c.upper().replace(".", "_"))
                continue
            values = {r[2][ti][ax] for r in runs}
            if len(values) == 1:  # the same in every case: a number, not a dim
                shape.append(str(values.pop()))
                continue
            d = "%s_D%d" % (name.upper(), ax)
            dims.append({"name": d, "tensor": ti, "axis": ax})
            shape.append(d)
        tensors.append({"name": name, "role": role, "dtype": DTYPES[t.dtype], "shape": shape})
    cases = []
    for label, over, shapes in runs:
        values = {}
        for d in dims:
            values[d["name"]] = over.get(d["const"], ints[d["const"]]) if "const" in d else shapes[d["tensor"]][d["axis"]]
        cases.append({"label": label, "dims": values})
    # Generators: what the original data looks like.
    dim_of = {d["name"]: ints[d["const"]] if "const" in d else base[d["tensor"]][d["axis"]] for d in dims}
    for spec, (role, _, t) in zip(tensors, roles):
        if role == "output":
            continue
        spec["init"] = guess_init(spec, t, dim_of, tensors)
    attrs = []
    for n, (v, _) in consts.items():
        if n in dim_consts or "." in n:
            continue
        if isinstance(v, bool):
            attrs.append({"name": n, "dtype": "bool", "value": v})
        elif isinstance(v, int):
            attrs.append({"name": n, "dtype": "i64", "value": v})
        elif isinstance(v, float):
            attrs.append({"name": n, "dtype": "f32", "value": v})
    product_terms, products_note = fit_products(products, cases)
    print(json.dumps({"dims": dims, "tensors": tensors, "cases": cases, "attrs": attrs,
                      "product_terms": product_terms, "products_note": products_note,
                      "forward_args": len(inputs), "parameters": [n for n, _ in params],
                      "dim_constants": {d["name"]: d["const"] for d in dims if "const" in d}}))


def fit_products(products, cases):
    """The products' flops as a sum of monomials over the dims: for each product (in call
    order, the same ops in every case), the coefficient and the dims' powers that give its
    flops on every case, the lowest degree first. Exact on every case of the op; ([], why) when
    a product has no such monomial (its count changes with the dims, or its flops are no
    product of them)."""
    from fractions import Fraction
    from itertools import product as cartesian
    labels = [c["label"] for c in cases]
    calls = [products[l] for l in labels]
    if not calls or not calls[0]:
        return [], ""
    if any([op for op, _ in c] != [op for op, _ in calls[0]] for c in calls):
        return [], "the matrix products differ from case to case"
    values = [c["dims"] for c in cases]
    varying = [d for d in values[0] if len({v[d] for v in values}) > 1]
    if len(varying) > 8:
        return [], "too many dims vary to fit the products' flops"
    powers = sorted(cartesian(range(4), repeat=len(varying)), key=lambda e: (sum(e), max(e, default=0), [-x for x in e]))
    terms = {}
    for i in range(len(calls[0])):
        flops = [c[i][1] for c in calls]
        for e in powers:
            prods = [math.prod(v[d] ** k for d, k in zip(varying, e)) for v in values]
            coef = Fraction(flops[0], prods[0])
            if coef > 0 and all(Fraction(f, p) == coef for f, p in zip(flops[1:], prods[1:])):
                key = tuple((d, k) for d, k in zip(varying, e) if k)
                terms[key] = terms.get(key, 0) + coef
                break
        else:
            return [], "the flops of %s are no monomial of the dims" % calls[0][i][0]
    return [{"coef": [c.numerator, c.denominator], "dims": [list(x) for x in key]} for key, c in terms.items()], ""


def guess_init(spec, t, dim_of, tensors):
    if t.numel() == 0:
        return ""
    if t.dtype == torch.bool:
        p = min(0.99, max(0.01, round(t.float().mean().item(), 2)))
        return "mask(%g)" % p
    if not t.dtype.is_floating_point:
        lo, hi = int(t.min().item()), int(t.max().item())
        if lo >= 0:
            # randint(0, D) draws just below some dim D: name it, so scaled cases stay in range.
            for d, v in sorted(dim_of.items(), key=lambda kv: kv[1]):
                if hi < v and hi >= 0.8 * (v - 1):
                    return "randint(0, %s - 1)" % d
        return "randint(%d, %d)" % (lo, hi)
    x = t.float()
    lo, hi = x.min().item(), x.max().item()
    if spec["role"] == "param":
        if lo == hi:
            return "const(%r)" % lo
        bound = max(abs(lo), abs(hi))
        fan = fan_in(spec, tensors)
        if fan and bound <= 1.0001 / math.sqrt(math.prod(dim_of[d] if d in dim_of else int(d) for d in fan)):
            b = "1 / sqrt(%s)" % " * ".join(fan)
            return "uniform(-%s, %s)" % (b, b)
        return "uniform(%.4g, %.4g)" % (lo, hi)
    if lo >= 0 and hi <= 1:
        return "uniform(0, 1)"
    return "normal(0, 1)"


def fan_in(spec, tensors):
    """PyTorch's fan-in of a weight (its axes after the first) or of the bias beside one."""
    if len(spec["shape"]) >= 2:
        return spec["shape"][1:]
    if spec["name"].endswith("bias"):
        w = spec["name"][:-4] + "weight"
        for o in tensors:
            if o["name"] == w and len(o["shape"]) >= 2:
                return o["shape"][1:]
    return None


if __name__ == "__main__":
    try:
        main()
    except Refused as r:
        print(json.dumps({"error": r.what, "line": r.line}))

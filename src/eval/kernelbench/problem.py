def kope_constants(tree):
    """The module constants a KernelBench problem sets with literals: name -> (value, line).
    `height, width = 32, 32` counts, and so do the integers of a tuple (`input_shape = (4000,)`
    gives "input_shape.0"); computed ones (`shape = (n, 1)`) are recomputed from them."""
    import ast
    out = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = [(target, value)]
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = list(zip(target.elts, value.elts))
        for t, v in pairs:
            if not isinstance(t, ast.Name):
                continue
            if isinstance(v, ast.Constant) and isinstance(v.value, (int, float)):
                out[t.id] = (v.value, node.lineno)
            elif isinstance(v, ast.Tuple):  # `input_shape = (4000,)`: element i is "input_shape.i"
                for i, e in enumerate(v.elts):
                    if isinstance(e, ast.Constant) and isinstance(e.value, int) and not isinstance(e.value, bool):
                        out["%s.%d" % (t.id, i)] = (e.value, node.lineno)
    return out


def kope_problem(source, filename, values):
    """Executes a KernelBench problem with some of its literal constants replaced by `values`,
    so that constants computed from them follow; returns its namespace."""
    import ast
    tree = ast.parse(source, filename)
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        if isinstance(target, ast.Name) and target.id in values:
            node.value = ast.Constant(values[target.id])
        elif isinstance(target, ast.Name) and isinstance(value, ast.Tuple):
            for i in range(len(value.elts)):
                if "%s.%d" % (target.id, i) in values:
                    value.elts[i] = ast.Constant(values["%s.%d" % (target.id, i)])
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            for i, t in enumerate(target.elts):
                if isinstance(t, ast.Name) and t.id in values:
                    value.elts[i] = ast.Constant(values[t.id])
    ast.fix_missing_locations(tree)
    ns = {"__name__": "kernelbench_problem"}
    exec(compile(tree, filename, "exec"), ns)
    return ns

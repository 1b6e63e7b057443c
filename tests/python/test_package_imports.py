"""The nibble package's import structure: every module imports on its own in a fresh interpreter, the
intra-package imports (module level and inside functions alike) form a DAG, and they run one way:
nibble.torch -> nibble.backends -> nibble._ext / nibble.seeds, never back up."""
import ast
import os
import subprocess
import sys

import pytest

import nibble

PKG_DIR = os.path.dirname(nibble.__file__)


def _modules():
    """{dotted name: file} of every .py module of the package as imported (source tree or installed)."""
    mods = {}
    for root, _, files in os.walk(PKG_DIR):
        rel = os.path.relpath(root, PKG_DIR)
        parts = ["nibble"] + ([] if rel == "." else rel.split(os.sep))
        for f in files:
            if f.endswith(".py"):
                name = ".".join(parts if f == "__init__.py" else parts + [f[:-3]])
                mods[name] = os.path.join(root, f)
    return mods


MODULES = _modules()
COMPILED = {"nibble._C"}  # extension modules: no Python source, no imports of the package


def _imports(name, path):
    """The package modules that module `name` (file `path`) imports anywhere in its body."""
    is_pkg = path.endswith("__init__.py")
    package = name if is_pkg else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            # `from M import x` imports M.x when x is a submodule (the compiled nibble._C included), else reads
            # the name x from M's body: a dependency on M. An ancestor package M is initialised before any
            # of its modules runs, so importing a submodule through it adds no edge to M itself.
            subs = [f"{mod}.{a.name}" for a in node.names]
            names_read = [s for s in subs if s not in MODULES and s not in COMPILED]
            ancestor = name == mod or name.startswith(mod + ".")
            targets = subs + ([mod] if names_read or not ancestor else [])
        else:
            continue
        for t in targets:
            if t in MODULES and t != name:
                out.add(t)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_package_has_the_expected_modules():
    # The graph below is only meaningful if the walk found the package's modules.
    for m in ("nibble", "nibble._ext", "nibble.seeds", "nibble.torch", "nibble.distributed", "nibble.backends",
              "nibble.backends.reference", "nibble.backends.emulated", "nibble.backends.emulate",
              "nibble.backends.common", "nibble.backends.quartet", "nibble.backends.fp8", "nibble.backends.mxfp4",
              "nibble.backends.decoded"):
        assert m in MODULES, (m, sorted(MODULES))


def _find_cycle(graph):
    """One import cycle as a list of module names, or None (depth-first search with colours)."""
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_cycle_finder_finds_a_planted_cycle():
    # The checker itself: a graph with a cycle must be reported, the package's graph plus one back edge too.
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    planted = {k: set(v) for k, v in GRAPH.items()}
    planted["nibble._ext"].add("nibble.torch")
    assert _find_cycle(planted) is not None


def test_intra_package_imports_form_a_dag():
    cycle = _find_cycle(GRAPH)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_run_one_way():
    # Backends and the shared lower modules never import the layer above them.
    upper = {"nibble.torch", "nibble.distributed"}
    for name, deps in GRAPH.items():
        if name.startswith("nibble.backends") or name in ("nibble._ext", "nibble.seeds"):
            assert not deps & upper, (name, sorted(deps & upper))
    for low in ("nibble._ext", "nibble.seeds"):
        assert not {d for d in GRAPH[low] if d.startswith("nibble.backends")}, (low, GRAPH[low])
    assert "nibble.backends.quartet" in GRAPH["nibble.torch"]
    assert "nibble._ext" in GRAPH["nibble.backends.quartet"]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_imports_alone_in_a_fresh_interpreter(module):
    # A cycle that the static graph misses (say, through importlib) shows as a partially initialised module.
    code = f"import importlib, sys; m = importlib.import_module({module!r}); print(m.__name__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ), cwd=os.path.dirname(PKG_DIR))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == module


def test_tests_run_against_the_expected_package():
    # tools/pip_test.sh sets NIBBLE_EXPECT_INSTALLED=1: the package must then be the installed one (not
    # python/ of the checkout) and carry its own nibble._C.
    if os.environ.get("NIBBLE_EXPECT_INSTALLED") != "1":
        pytest.skip("build-tree run (tools/python_test.sh)")
    repo_python = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    assert not os.path.abspath(PKG_DIR).startswith(repo_python + os.sep), PKG_DIR
    assert "NIBBLE_BUILD_DIR" not in os.environ
    ext = nibble.load_extension()
    assert os.path.dirname(os.path.abspath(ext.__file__)) == os.path.abspath(PKG_DIR)

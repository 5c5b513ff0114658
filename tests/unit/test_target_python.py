"""What runs on the nodes runs under Python 3.6: the modules (plugins/modules) and every module_utils file they import,
directly or through another. CentOS 7 and Oracle Linux 7 nodes ship Python 3.6, which ansible-core 2.16 still manages
(2.17 and later need 3.7+ on the node). Controller-side code (filters, callbacks, plugin_utils, scripts, tests) may
use newer Python.

Always: the grammar of 3.6 (ast with feature_version: no walrus, positional-only parameters or f"{x=}"), no
`from __future__ import annotations`, no annotation that Python evaluates when the module loads and 3.6 cannot
(`list[str]`, `X | None`, `re.Match`), and no call of the standard library that 3.6 lacks. With a real Python 3.6
(pyenv's, python3.6 on PATH, or KGN_PYTHON36), each file is also compiled and imported by it.
"""

from __future__ import annotations

import ast
import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "plugins"
PACKAGE = "ansible_collections.kgn.gpu_nodes.plugins"


def _module_utils_imported(path: Path) -> set:
    """This collection's module_utils files that PATH imports, as paths under module_utils without ".py"
    (``runtime/cdi``; a package's ``__init__`` too: it is shipped and run with its modules)."""
    base = PLUGINS / "module_utils"
    prefix = f"{PACKAGE}.module_utils"

    def found(*parts):
        name = "/".join(parts)
        if (base / f"{name}.py").is_file():
            return {name} | ({f"{parts[0]}/__init__"} if len(parts) > 1 else set())
        return {f"{name}/__init__"} if (base / name).is_dir() else set()

    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[:5] == prefix.split("."):
            parts = node.module.split(".")[5:]
            names |= found(*parts) if parts else set()
            for alias in node.names:
                names |= found(*parts, alias.name)
        elif isinstance(node, ast.Import):
            names |= {n for a in node.names if a.name.startswith(f"{prefix}.") for n in found(*a.name.split(".")[5:])}
    return names


def target_files() -> list:
    """The modules and the module_utils files they import, directly or not."""
    modules = sorted((PLUGINS / "modules").glob("*.py"))
    todo = [name for module in modules for name in _module_utils_imported(module)]
    seen = set()
    while todo:
        name = todo.pop()
        path = PLUGINS / "module_utils" / f"{name}.py"
        if name in seen or not path.is_file():
            continue
        seen.add(name)
        todo.extend(_module_utils_imported(path))
    return modules + sorted(PLUGINS / "module_utils" / f"{name}.py" for name in seen)


TARGET = target_files()

# Not in Python 3.6's standard library (added in 3.7 to 3.11).
NEW_MODULES = {"dataclasses", "contextvars", "importlib.resources", "importlib.metadata", "graphlib", "zoneinfo",
               "tomllib"}
NEW_NAMES = {
    "typing": {"Literal", "Final", "final", "Protocol", "TypedDict", "Annotated", "ForwardRef", "get_args",
               "get_origin", "runtime_checkable", "OrderedDict", "ParamSpec", "TypeAlias", "Concatenate",
               "TypeGuard", "Self", "Never", "LiteralString", "Required", "NotRequired", "Unpack", "assert_never",
               "reveal_type", "override"},
    "functools": {"cache", "cached_property", "singledispatchmethod"},
    "math": {"prod", "isqrt", "dist", "comb", "perm", "lcm", "nextafter", "ulp"},
    "itertools": {"pairwise"},
    "shlex": {"join"},
    "contextlib": {"nullcontext", "asynccontextmanager", "aclosing", "chdir"},
    "hashlib": {"file_digest"},
    "time": {"time_ns", "monotonic_ns", "perf_counter_ns", "process_time_ns"},
    "re": {"Match", "Pattern"},
    "os": {"waitstatus_to_exitcode", "pidfd_open"},
    "random": {"randbytes"},
    "xml.etree.ElementTree": {"indent"},
    "ET": {"indent"},
}
# methods of str, bytes, int, datetime, pathlib and others that 3.6 lacks
NEW_METHODS = {"removeprefix", "removesuffix", "isascii", "fromisoformat", "is_relative_to", "bit_count",
               "hardlink_to", "with_stem"}
# keywords of calls that 3.6 does not know
NEW_KEYWORDS = {"capture_output": None, "text": {"run", "Popen", "check_output", "check_call", "call"},
                "missing_ok": {"unlink"}, "dirs_exist_ok": {"copytree"}, "strict": {"zip"},
                "usedforsecurity": None}
# what annotations evaluated at load time may subscript: the typing module's generics
BUILTIN_GENERICS = {"list", "dict", "set", "frozenset", "tuple", "type"}


def _runtime_annotations(tree: ast.AST):
    """Annotations Python evaluates when the module loads: of functions (at def time) and of variables at module or
    class level. Those of local variables are never evaluated."""
    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    if arg is not None and arg.annotation is not None:
                        yield arg.annotation
                if child.returns is not None:
                    yield child.returns
                yield from visit(child, True)
            elif isinstance(child, ast.AnnAssign):
                if not in_function:
                    yield child.annotation
            else:
                yield from visit(child, in_function)

    yield from visit(tree, False)


def _annotation_problem(annotation: ast.AST, from_collections: set) -> str | None:
    for node in ast.walk(annotation):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return "`X | Y` (3.10)"
        if isinstance(node, ast.Subscript):
            base = node.value
            if isinstance(base, ast.Name) and (base.id in BUILTIN_GENERICS or base.id in from_collections):
                return f"`{base.id}[...]` (3.9)"
            if isinstance(base, ast.Attribute) and not ast.unparse(base).startswith("typing."):
                return f"`{ast.unparse(base)}[...]` (3.9)"
    return None


def problems(path: Path, root: Path = ROOT) -> list:
    """'path:line: what' for everything in PATH that Python 3.6 cannot run, the path relative to ROOT."""
    source = path.read_text(encoding="utf-8")
    name = path.relative_to(root)
    try:
        tree = ast.parse(source, str(name), feature_version=(3, 6))
    except SyntaxError as err:
        return [f"{name}:{err.lineno}: not Python 3.6 grammar: {err.msg}"]
    found = []

    def say(node, what):
        found.append(f"{name}:{node.lineno}: {what}")

    from_collections = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module == "__future__" and any(a.name == "annotations" for a in node.names):
                say(node, "`from __future__ import annotations` is Python 3.7+")
            if module in NEW_MODULES:
                say(node, f"module {module} is not in Python 3.6")
            if module in ("collections", "collections.abc"):
                from_collections |= {a.asname or a.name for a in node.names}
            for alias in node.names:
                if alias.name in NEW_NAMES.get(module, ()):
                    say(node, f"{module}.{alias.name} is not in Python 3.6")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in NEW_MODULES:
                    say(node, f"module {alias.name} is not in Python 3.6")
        elif isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if node.attr in NEW_NAMES.get(owner, ()):
                say(node, f"{owner}.{node.attr} is not in Python 3.6")
            elif node.attr in NEW_METHODS:
                say(node, f".{node.attr}() is not in Python 3.6")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            for keyword in node.keywords:
                where = NEW_KEYWORDS.get(keyword.arg, ())
                if keyword.arg in NEW_KEYWORDS and (where is None or called in where):
                    say(node, f"{called}({keyword.arg}=...) is not in Python 3.6")
        elif isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.BitOr):
            operands = [node.left, node.right] if isinstance(node, ast.BinOp) else [node.value]
            if any(isinstance(o, ast.Dict | ast.DictComp) for o in operands):
                say(node, "dict | dict is Python 3.9+")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Name | ast.Attribute) and ast.unparse(decorator).endswith("lru_cache"):
                    say(decorator, "@lru_cache without () is Python 3.8+")
    for annotation in _runtime_annotations(tree):
        what = _annotation_problem(annotation, from_collections)
        if what:
            say(annotation, f"annotation {what} is evaluated when the module loads: quote it")
    return found


def test_the_target_side_is_what_the_modules_import():
    names = {p.relative_to(PLUGINS).as_posix() for p in TARGET}
    assert "modules/nvidia_driver.py" in names
    assert {"module_utils/driver/driver.py", "module_utils/runtime/tomlio.py"} <= names


def test_target_side_code_is_python_3_6():
    found = [line for path in TARGET for line in problems(path)]
    assert not found, "Python 3.6 on the nodes (CentOS 7, Oracle Linux 7) cannot run:\n" + "\n".join(found)


@pytest.mark.parametrize("code, line, what", [
    ("from __future__ import annotations\n", 1, "from __future__ import annotations"),
    ("x = 1\nif (n := x):\n    pass\n", 2, "not Python 3.6 grammar"),
    ("def f(a, /):\n    pass\n", 1, "not Python 3.6 grammar"),
    ("x = 1\ny = f'{x=}'\n", 2, "not Python 3.6 grammar"),
    ("def f(a: list[str]) -> None:\n    pass\n", 1, "`list[...]` (3.9)"),
    ("def f() -> 'list[str]':\n    pass\n", None, None),
    ("\ndef f(a: int | None):\n    pass\n", 2, "`X | Y` (3.10)"),
    ("def f():\n    x: dict[str, int] = {}\n", None, None),
    ("X: dict[str, int] = {}\n", 1, "`dict[...]` (3.9)"),
    ("import re\n\ndef f(m: re.Match):\n    pass\n", 3, "re.Match is not in Python 3.6"),
    ("x = 'a'.removeprefix('b')\n", 1, ".removeprefix() is not in Python 3.6"),
    ("import subprocess\nsubprocess.run(['x'], capture_output=True)\n", 2, "run(capture_output=...)"),
    ("import subprocess\nsubprocess.run(['x'], text=True)\n", 2, "run(text=...)"),
    ("from dataclasses import dataclass\n", 1, "module dataclasses"),
    ("a = {} | {'b': 1}\n", 1, "dict | dict"),
    ("x = 1\ny = f'{x == 1}'\n", None, None),
])
def test_the_check_names_file_line_and_what(tmp_path, code, line, what):
    path = tmp_path / "plugins" / "module_utils" / "sample.py"
    path.parent.mkdir(parents=True)
    path.write_text(code, encoding="utf-8")
    found = problems(path, tmp_path)
    if what is None:
        assert found == []
    else:
        assert found and found[0].startswith(f"plugins/module_utils/sample.py:{line}: ") and what in found[0], found


def python36() -> str | None:
    """A real Python 3.6: KGN_PYTHON36, pyenv's, or python3.6 on PATH (pyenv's shim for it may not run it)."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates = [os.environ.get("KGN_PYTHON36"), *sorted(glob.glob(f"{pyenv}/versions/3.6*/bin/python3.6")),
                  shutil.which("python3.6")]
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 6))"],
                                 capture_output=True, text=True, timeout=30, check=False).stdout
        except OSError:
            continue
        if out.strip() == "True":
            return candidate
    return None


IMPORT_ALL = """
import importlib, sys, traceback
failed = 0
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        failed += 1
        print("--- " + name)
        traceback.print_exc(limit=-2)
sys.exit(failed)
"""


def test_target_side_code_compiles_and_imports_under_python_3_6(tmp_path):
    """Byte-compile each file with a real Python 3.6, then import each (module-level code, default values and the
    annotations of every def run). ansible-core's own module_utils are stood in for by classes of the imported
    names: this is about the collection's code, and ansible-core 2.16's module_utils support 3.6 themselves."""
    interpreter = python36()
    if interpreter is None:
        pytest.skip("no Python 3.6 here (pyenv's, python3.6 on PATH or KGN_PYTHON36): only the ast check ran")
    compiled = subprocess.run(
        [interpreter, "-c", "import sys\nfor f in sys.argv[1:]:\n    compile(open(f, 'rb').read(), f, 'exec')",
         *[str(p.relative_to(ROOT)) for p in TARGET]],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert compiled.returncode == 0, compiled.stderr

    (tmp_path / "ansible_collections" / "kgn").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "kgn" / "gpu_nodes").symlink_to(ROOT)
    stubs = {}
    for path in TARGET:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ansible.module_utils."):
                stubs.setdefault(node.module, set()).update(a.name for a in node.names)
    for module, names in stubs.items():
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = tmp_path.joinpath(*parts[:depth])
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
        tmp_path.joinpath(*parts[:-1], parts[-1] + ".py").write_text(
            "".join(f"class {name}(object):\n    pass\n" for name in sorted(names)))
    names = [".".join([PACKAGE, *p.relative_to(PLUGINS).with_suffix("").parts]).removesuffix(".__init__")
             for p in TARGET]
    imported = subprocess.run([interpreter, "-c", IMPORT_ALL, *names], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"},
                              cwd=tmp_path, check=False)
    assert imported.returncode == 0, f"under {interpreter}:\n{imported.stdout}{imported.stderr}"


def _closure(path: Path) -> set:
    todo, seen = list(_module_utils_imported(path)), set()
    while todo:
        name = todo.pop()
        if name not in seen and (PLUGINS / "module_utils" / f"{name}.py").is_file():
            seen.add(name)
            todo.extend(_module_utils_imported(PLUGINS / "module_utils" / f"{name}.py"))
    return seen


@pytest.mark.parametrize("module", sorted((PLUGINS / "modules").glob("*.py")), ids=lambda p: p.stem)
def test_a_module_ships_its_own_concern_not_every_planner(module):
    # Ansible sends a module with every module_utils file it imports, and the node compiles them on every call;
    # plan.py (every section planner) and the controller's verify and contract are for the controller only.
    assert _closure(module) & {"plan", "verify/verify", "contract"} == set()

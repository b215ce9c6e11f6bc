"""The Python examples of README.md, python/README.md and the guide's chapters
(docs/guide/src/*.md): every ```python block (indented ones in lists too) is parsed everywhere,
so that a syntax error fails CI, and run on a GPU.

Setup an example needs but does not show sits in an HTML comment right before its fence (blank
lines between are allowed), which renders as nothing; it is run first, in the same namespace
(the rule of xtask/scripts/test-readme-snippets.sh, which compiles the C, Fortran and CUDA blocks):

    <!-- snippet-context
    import cupy
    -->

A run imports python/examples/ as modules (``from cupy_append import SOURCE``) and skips when a
framework the example imports (PyTorch, CuPy, ...) is not installed or sees no device.
"""

import ast
import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "python" / "README.md"]
# Only the chapters that show Python: each README must show some.
GUIDE = sorted((ROOT / "docs" / "guide" / "src").glob("*.md"))
EXAMPLES = ROOT / "python" / "examples"

_FENCE = re.compile(r"^([ \t]*)```[ \t]*(\S*)[ \t]*$")
_CLOSE = re.compile(r"^[ \t]*```[ \t]*$")
_CONTEXT_OPEN = re.compile(r"^[ \t]*<!-- snippet-context[ \t]*$")
_CONTEXT_CLOSE = re.compile(r"^[ \t]*-->[ \t]*$")


def _dedent(line, indent):
    return line[indent:] if line[:indent].strip() == "" else line


def python_snippets(path):
    """[(line of the opening fence, code, context)] of the ```python blocks of `path`; code and
    context are dedented by the indentation of their fence / comment."""
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    context, context_indent, i = None, 0, 0
    while i < len(lines):
        line = lines[i]
        if _CONTEXT_OPEN.match(line):
            context_indent = len(line) - len(line.lstrip())
            body = []
            i += 1
            while i < len(lines) and not _CONTEXT_CLOSE.match(lines[i]):
                body.append(_dedent(lines[i], context_indent))
                i += 1
            if i == len(lines):
                raise AssertionError(f"{path.name}: an unclosed snippet-context comment")
            context = "\n".join(body) + "\n"
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            indent, tag, start = len(fence.group(1)), fence.group(2), i + 1
            body = []
            i += 1
            while i < len(lines) and not _CLOSE.match(lines[i]):
                body.append(_dedent(lines[i], indent))
                i += 1
            if i == len(lines):
                raise AssertionError(f"{path.name}: the fence at line {start} is never closed")
            if tag == "python":
                out.append((start, "\n".join(body) + "\n", context or ""))
            context = None
            i += 1
            continue
        if line.strip():
            context = None
        i += 1
    return out


SNIPPETS = [
    pytest.param(path, line, code, context, id=f"{path.relative_to(ROOT)}:{line}")
    for path in READMES + GUIDE
    for line, code, context in python_snippets(path)
]


def _compiled(path, line, code, context):
    """(context, code) compiled; the code's line numbers are its lines in the README."""
    name = str(path.relative_to(ROOT))
    ctx = compile(context, f"{name} (snippet-context before line {line})", "exec")
    # `line` newlines first: the snippet's first line is the README's line `line + 1`.
    return ctx, compile("\n" * line + code, name, "exec")


def test_every_readme_has_python_examples():
    for path in READMES:
        assert python_snippets(path), f"no ```python block found in {path.relative_to(ROOT)}"
    assert any(python_snippets(path) for path in GUIDE), "no ```python block found in the guide"


@pytest.mark.parametrize("path, line, code, context", SNIPPETS)
def test_readme_example_parses(path, line, code, context):
    _compiled(path, line, code, context)


def _imported_modules(*sources):
    names = set()
    for src in sources:
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _skip_unless_usable(module):
    """Skips the test when `module` (a framework an example imports) is missing or sees no GPU."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the example imports {module}, which is not installed")
    if module == "torch":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("PyTorch sees no CUDA device")
    elif module == "cupy":
        import cupy

        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                pytest.skip("CuPy sees no CUDA device")
        except cupy.cuda.runtime.CUDARuntimeError as e:
            pytest.skip(f"CuPy sees no CUDA device: {e}")


@pytest.mark.gpu
@pytest.mark.parametrize("path, line, code, context", SNIPPETS)
def test_readme_example_runs(path, line, code, context, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    for module in sorted(_imported_modules(context, code)):
        _skip_unless_usable(module)
    ctx, snippet = _compiled(path, line, code, context)
    namespace = {"__name__": "readme_example"}
    exec(ctx, namespace)
    exec(snippet, namespace)

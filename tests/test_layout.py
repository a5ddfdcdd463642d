"""The house rules of the layout (issue 19), checked on the source: no import cycle among rewardkit's modules
(imports inside functions included), no import of another module's private names, no absolute path of a
development machine in a tracked file."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: where the installed packages live in the checkout (cli/ and evals/ install as rewardkit.cli/.evals)
PACKAGES = {"rewardkit": ROOT / "rewardkit", "rewardkit.cli": ROOT / "cli", "rewardkit.evals": ROOT / "evals"}
#: home folders of the machines this project is developed on; this file is the one place naming them
MACHINE_PATHS = ("/work/", "/home/", "/root/")


def modules() -> dict[str, Path]:
    out = {}
    for base, folder in PACKAGES.items():
        for f in sorted(folder.rglob("*.py")):
            parts = list(f.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([base, *parts])] = f
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, str | None, int]]:
    """``(module, imported name or None, line)`` for every import of a known module anywhere in the file
    (top level, inside functions, under ``if``). ``from pkg import sub`` counts as importing ``pkg.sub``."""
    out = []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names if a.name in known]
        elif isinstance(node, ast.ImportFrom):
            src = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                src = f"{base}.{src}" if src else base
            if src not in known:
                continue
            for a in node.names:
                sub = f"{src}.{a.name}"
                out.append((sub, None, node.lineno) if sub in known else (src, a.name, node.lineno))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-import): Tarjan's algorithm."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in graph[v]:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_rewardkit_modules():
    known = modules()
    assert {"rewardkit.scoring", "rewardkit.cli.app", "rewardkit.evals.tts"} <= set(known)
    graph = {m: {dep for dep, _, _ in imports(m, p, known) if dep != m} for m, p in known.items()}
    assert cycles(graph) == []


def test_no_module_imports_another_modules_private_names():
    known = modules()
    files = {**known, **{f"benchmarks.{f.stem}": f for f in sorted((ROOT / "benchmarks").glob("*.py"))}}
    bad = [f"{files[m].relative_to(ROOT)}:{line}: {src}.{n}"
           for m, path in files.items() for src, n, line in imports(m, path, known)
           if n and n.startswith("_") and not n.startswith("__") and src != m]
    assert bad == []


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_no_tracked_file_names_an_absolute_path_of_a_development_machine():
    from rewardkit.evals.data import shared_dir

    bases = [*MACHINE_PATHS, str(ROOT) + "/"]
    try:
        bases.append(str(shared_dir().resolve()) + "/")
    except FileNotFoundError:
        pass
    hits = []
    for f in tracked_files():
        if f == Path(__file__).resolve() or not f.is_file():
            continue
        data = f.read_bytes()
        if b"\0" in data:  # binary (plots)
            continue
        text = data.decode("utf-8", "replace")
        hits += [f"{f.relative_to(ROOT)}: {b}" for b in bases if b in text]
    assert hits == []  # use the shared-data fixture, rewardkit.evals.data or a checkout-relative path


def test_public_entry_points_carry_a_running_example():
    """`pytest --doctest-modules rewardkit` (the README's test command) runs these examples."""
    import rewardkit
    from rewardkit import verdicts

    for fn in (rewardkit.get_scorer, rewardkit.grpo_advantages, rewardkit.dr_grpo_advantages,
               rewardkit.rloo_advantages, rewardkit.bradley_terry, rewardkit.vote, rewardkit.reszero_rewards):
        assert ">>> " in (fn.__doc__ or ""), fn.__name__
    examples = [line for line in verdicts.__doc__.splitlines() if line.strip().startswith(">>>")]
    for parser in {*verdicts.PARSERS.values(), verdicts.parse_expert_policy}:
        assert any(parser.__name__ + "(" in line for line in examples), parser.__name__

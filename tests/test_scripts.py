"""The set-up scripts' parts that can run in seconds: an environment made from a virtual environment sees that
environment's packages (scripts/venv_inheriting.py, used by scripts/frameworks_env.sh), and a test that skips
for an import says the real import error (rewardkit.testing.import_or_skip)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from rewardkit.testing import import_or_skip

ROOT = Path(__file__).resolve().parents[1]


def test_an_environment_made_from_a_venv_sees_the_venvs_packages(tmp_path):
    outer = tmp_path / "outer"  # a user's venv on top of this interpreter, holding a package of its own
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(outer)], check=True)
    purelib = subprocess.run([str(outer / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "rk_only_in_outer.py").write_text("WHERE = 'outer'\n")
    inner = tmp_path / "inner"
    subprocess.run([str(outer / "bin" / "python"), str(ROOT / "scripts" / "venv_inheriting.py"), str(inner)],
                   check=True, capture_output=True)
    inner_lib = Path(subprocess.run([str(inner / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    check=True, capture_output=True, text=True).stdout.strip())
    (inner_lib / "httpx.py").write_text("WHERE = 'inner'\n")  # installed into the new environment: it wins
    probe = ("import rk_only_in_outer, httpx, pip, sys; "
             "print(rk_only_in_outer.WHERE, httpx.WHERE, sys.prefix == sys.base_prefix)")
    res = subprocess.run([str(inner / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]  # `venv --system-site-packages` from the venv: No module named ...
    assert res.stdout.split() == ["outer", "inner", "False"]
    assert sysconfig.get_paths()["purelib"] not in str(inner_lib)


def test_a_skip_for_an_import_names_the_real_error(tmp_path, monkeypatch):
    (tmp_path / "rk_framework_stub").mkdir()
    (tmp_path / "rk_framework_stub" / "__init__.py").write_text("import rk_missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(pytest.skip.Exception) as info:
        import_or_skip("rk_framework_stub", "see the docs")
    msg = str(info.value)
    assert "rk_framework_stub does not import" in msg and "No module named 'rk_missing_dependency'" in msg, msg
    assert msg.endswith("see the docs")

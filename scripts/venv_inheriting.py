"""Create a virtual environment that sees the packages of the interpreter running this script, a venv's included.

    python scripts/venv_inheriting.py DIR

``python -m venv --system-site-packages`` inherits the *base* interpreter's packages: run from a virtual
environment, the new one does not see that environment's packages (``No module named 'httpx'``). Here every
site directory on this interpreter's ``sys.path`` is added to the new environment after its own (a ``.pth``
file that calls ``site.addsitedir``, so their ``.pth`` files, editable installs included, work too): packages
installed into the new environment win, the rest come from the one that made it. It has no pip of its own:
``DIR/bin/python -m pip`` runs the inherited pip and installs into ``DIR``.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

PTH = "zz_inherited_site_dirs.pth"  # processed after the environment's own .pth files


def site_dirs() -> list[str]:
    """This interpreter's site directories, in ``sys.path`` order."""
    return list(dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")))


def create(target: Path) -> Path:
    """Create the environment at ``target`` (replacing one there); return the ``.pth`` file written."""
    venv.EnvBuilder(clear=True, with_pip=False, symlinks=True).create(target)
    purelib = subprocess.run([str(target / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    pth = Path(purelib) / PTH
    pth.write_text(f"import site; list(map(site.addsitedir, {site_dirs()!r}))\n")
    return pth


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(f"{sys.argv[1]}: inherits {', '.join(site_dirs())}")
    create(Path(sys.argv[1]))

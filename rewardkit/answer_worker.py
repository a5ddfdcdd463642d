"""Worker process for answer equivalence: one JSON ``[gold, pred]`` per stdin line, one JSON reply per line.

Runs math-verify with its SIGALRM timeouts off; the parent enforces deadlines by killing this process.
"""

from __future__ import annotations

import json
import logging
import sys


def main() -> None:
    for name in ("math_verify", "math_verify.parser", "math_verify.grader"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import math_verify  # noqa: F401  (imported before "ready": sympy's import is not part of a check's deadline)

    from rewardkit.answers import math_verify_equivalent

    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        gold, pred = json.loads(line)
        try:
            reply = {"ok": math_verify_equivalent(gold, pred)}
        except Exception as e:  # reported to the parent as an error status, never as False
            reply = {"error": repr(e)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()

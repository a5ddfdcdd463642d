"""The stand-ins' deterministic, deliberately limited "elaborator": decides Lean 4 messages from source text.

It is no proof checker. It recognises exactly these things and emits the messages real Lean 4 (4.35)
emits for them, with the same keys, kinds, severities and positions (line 1-based, column 0-based in
codepoints):

- ``sorry`` / ``admit`` in a ``theorem``/``lemma``/``def`` body: warning ``declaration uses `sorry` ``
  (kind ``hasSorry``) spanning the declaration's name; the declaration then depends on ``sorryAx``.
  With ``LEAN_STANDIN_OLD_SORRY=1`` the older spelling ``declaration uses 'sorry'`` is used.
- ``axiom NAME : ...``: declares an axiom; a declaration mentioning NAME depends on it (transitively).
- ``native_decide``: the declaration depends on ``Lean.ofReduceBool`` and ``Lean.trustCompiler``.
- tactic automation (simp, norm_num, linarith, nlinarith, positivity, ring, field_simp, omega, aesop,
  decide, tauto): the declaration depends on ``propext, Classical.choice, Quot.sound`` (a stand-in rule).
- ``exact X`` / ``apply X`` with a single identifier X that is neither declared in the source, bound in
  the statement (``(X : ...)``), introduced (``intro``/``have``/``obtain``/``rcases``), nor in
  ``KNOWN``: error ``Unknown identifier `X` `` spanning X (kind ``lean.unknownIdentifier._namedError``).
- ``#exit``: warning ``using 'exit' to interrupt Lean`` on the ``#exit`` token; nothing after it runs.
- ``#print axioms NAME``: information ``'NAME' depends on axioms: [...]`` (sorted like Lean's
  ``Name.lt``) or ``'NAME' does not depend on any axioms``, spanning the ``#print`` token; NAME is the
  declared name (``theorem decoy.x`` declares ``decoy.x``), ``_root_.NAME`` resolves to NAME.
- ``#print "TEXT"``: information ``TEXT``; ``#eval IO.println "TEXT"``: information ``TEXT`` plus a newline
  (what Lean logs for the captured output), both spanning the command's first token.
"""

from __future__ import annotations

import functools
import json
import re

KNOWN = {"rfl", "trivial", "True.intro", "le_refl", "Nat.le_refl", "Nat.succ_pos", "Nat.zero_lt_one",
         "absurd", "id", "Or.inl", "Or.inr", "And.intro"}
_AUTOMATION = re.compile(r"\b(simp|norm_num|linarith|nlinarith|positivity|ring|ring_nf|field_simp|omega|aesop|decide|tauto)\b")
_DECL = re.compile(r"^(?:(?:private|protected|noncomputable)\s+)*(theorem|lemma|def|abbrev|example|axiom)\b\s*([^\s:({\[]*)", re.M)
_CMD = re.compile(r"^(#exit|#print\s+axioms|#print|#eval|#check|open|import|set_option|namespace|end|section|variable|"
                  r"(?:(?:private|protected|noncomputable)\s+)*(?:theorem|lemma|def|abbrev|example|axiom))\b", re.M)


def _strip_comments(src: str) -> str:
    """Blank out comments (same length, newlines kept) so positions stay valid."""
    out = list(src)
    i = 0
    while i < len(src):
        if src.startswith("/-", i):
            j = src.find("-/", i + 2)
            j = len(src) if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif src.startswith("--", i):
            j = src.find("\n", i)
            j = len(src) if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


def _pos(src: str, offset: int, line_offset: int = 0) -> dict:
    line = src.count("\n", 0, offset) + 1 + line_offset
    col = offset - (src.rfind("\n", 0, offset) + 1)
    return {"line": line, "column": col}


def _name_cmp(a: str, b: str) -> int:
    """Lean's ``Name.cmp``: compare prefixes first, so shorter names (fewer components) sort first."""
    pa, pb = a.split("."), b.split(".")

    def cmp(x: list[str], y: list[str]) -> int:
        if not x and not y:
            return 0
        if not x:
            return -1
        if not y:
            return 1
        c = cmp(x[:-1], y[:-1])
        if c:
            return c
        return (x[-1] > y[-1]) - (x[-1] < y[-1])

    return cmp(pa, pb)


def elaborate(src: str, *, old_sorry: bool = False) -> list[dict]:
    """Messages (severity, data, pos, endPos, kind) for ``src``, in source order."""
    text = _strip_comments(src)
    cmds = [(m.start(), m.group(1)) for m in _CMD.finditer(text)]
    msgs: list[dict] = []
    axioms_of: dict[str, set[str]] = {}
    user_axioms: set[str] = set()
    for n, (start, kw) in enumerate(cmds):
        end = cmds[n + 1][0] if n + 1 < len(cmds) else len(text)
        chunk = text[start:end]
        if kw == "#exit":
            msgs.append(_msg("warning", "using 'exit' to interrupt Lean", src, start, start + 5))
            break
        if kw == "#print" or kw == "#eval":
            m = re.match(r'(?:#print|#eval\s+IO\.println)\s+"((?:[^"\\]|\\.)*)"', chunk)
            if m:
                data = json.loads(f'"{m.group(1)}"') + ("\n" if kw == "#eval" else "")
                msgs.append(_msg("information", data, src, start, start + len(kw)))
            continue
        if kw.startswith("#print"):
            m = re.match(r"#print\s+axioms\s+([^\s]+)", chunk)
            name = m.group(1) if m else ""
            if name.startswith("_root_."):
                name = name[len("_root_."):]
            if name not in axioms_of:
                msgs.append(_msg("error", f"Unknown constant `{name}`", src, start + m.start(1), start + m.end(1)))
                continue
            axs = sorted(axioms_of[name], key=functools.cmp_to_key(_name_cmp))
            data = (f"'{name}' depends on axioms: [{', '.join(axs)}]" if axs
                    else f"'{name}' does not depend on any axioms")
            msgs.append(_msg("information", data, src, start, start + 6))
            continue
        d = _DECL.match(chunk)
        if not d:
            continue
        kind, name = d.group(1), d.group(2)
        if kind == "axiom":
            user_axioms.add(name)
            axioms_of[name] = {name}
            continue
        deps: set[str] = set()
        body = chunk[d.end():]
        if re.search(r"\b(sorry|admit)\b", body):
            deps.add("sorryAx")
            data = "declaration uses 'sorry'" if old_sorry else "declaration uses `sorry`"
            msgs.append(_msg("warning", data, src, start + d.start(2), start + d.end(2), kind="hasSorry"))
        if re.search(r"\bnative_decide\b", body):
            deps |= {"Lean.ofReduceBool", "Lean.trustCompiler"}
        if _AUTOMATION.search(body):
            deps |= {"propext", "Classical.choice", "Quot.sound"}
        for other, axs in axioms_of.items():
            if re.search(rf"(?<![\w.]){re.escape(other)}(?![\w])", body):
                deps |= axs
        bound = set(re.findall(r"[({\[]\s*([^\s:(){}\[\]]+(?:\s+[^\s:(){}\[\]]+)*)\s*:", body))
        bound = {w for group in bound for w in group.split()}
        for m in re.finditer(r"\b(?:intro|intros|rintro|obtain|rcases|have|let|fun|cases|induction)\b([^\n:=]*)", body):
            bound |= set(re.findall(r"[A-Za-z_][\w']*", m.group(1)))
        for m in re.finditer(r"\b(?:exact|apply)\s+([A-Za-z_][\w.']*)\s*$", body, re.M):
            ident = m.group(1)
            root = ident.split(".")[0]
            if not ({ident, root} & (KNOWN | set(axioms_of) | bound)):
                a = start + d.end() + m.start(1)
                msgs.append(_msg("error", f"Unknown identifier `{ident}`", src, a, a + len(ident),
                                 kind="lean.unknownIdentifier._namedError"))
                deps.add("sorryAx")  # Lean elaborates the failed term to a synthetic sorry
        if name:
            axioms_of[name] = deps
    return msgs


def _msg(severity: str, data: str, src: str, a: int, b: int, kind: str = "[anonymous]") -> dict:
    return {"severity": severity, "data": data, "pos": _pos(src, a), "endPos": _pos(src, b), "kind": kind}


INIT_MISSING = ("unknown module prefix 'Init'\n\nNo directory 'Init' or file 'Init.olean' in the search path "
                "entries:\n/nonexistent/lib/lean")


def lean_pretty(obj, indent: int = 0, width: int = 100) -> str:
    """Render like Lean's ``Json.pretty`` as the REPL prints it: object keys in reverse order, one entry per
    line, short values inline (line breaking approximates Lean's Format at ``width``)."""
    import json

    flat = _flat(obj)
    if len(flat) + indent <= width or not isinstance(obj, (dict, list)):
        return flat
    pad = " " * (indent + 1)
    if isinstance(obj, list):
        return "[" + (",\n" + pad).join(lean_pretty(v, indent + 1, width) for v in obj) + "]"
    parts = []
    for k in sorted(obj, reverse=True):
        v = lean_pretty(obj[k], indent + 1, width)
        head = json.dumps(k, ensure_ascii=False) + ":"
        parts.append(head + ("\n" + pad + v if "\n" in v else " " + v))
    return "{" + (",\n" + pad).join(parts) + "}"


def _flat(obj) -> str:
    import json

    if isinstance(obj, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + _flat(obj[k]) for k in sorted(obj, reverse=True)) + "}"
    if isinstance(obj, list):
        return "[" + ", ".join(_flat(v) for v in obj) + "]"
    return json.dumps(obj, ensure_ascii=False)


def repl_message(m: dict) -> dict:
    """A message as the REPL writes it (REPL/JSON.lean ``Message.of``): severity ``info`` for Lean's
    ``information`` (``trace``/``info``/``warning``/``error`` is the REPL's own enum), keys pos, endPos, data."""
    sev = {"information": "info"}.get(m["severity"], m["severity"])
    return {"severity": sev, "pos": m["pos"], "endPos": m["endPos"], "data": m["data"]}

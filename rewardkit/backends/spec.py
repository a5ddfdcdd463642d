"""One grammar for judge specs: ``TARGET[?option=value&option=value...]``, the same for every backend.

``TARGET`` picks the backend (``smollm2``, a model path or hub id, ``hf:...``, ``http(s)://HOST/v1``,
``openai:NAME@URL``, ``vllm:MODEL``, ``llamacpp:PATH.gguf``); the query part sets that backend's
constructor options, e.g.::

    http://127.0.0.1:8000/v1?model=judge&timeout=30&retries=3&deadline=600
    smollm2?dtype=bfloat16&batch_size=4
    llamacpp:smollm2?n_ctx=4096

Each value is converted to the type the backend's ``Options`` class declares for that option by
``rewardkit.options.coerce`` (the same coercer as scorers' ``-o key=value``), so a backend that gains an
option gains it here with no change to this module. An unknown option, a repeated one or a value of the
wrong type is a ``ValueError`` naming it and the valid options. Values are percent-decoded (``%26`` for
``&``). A spec cannot carry secrets: ``api_key`` is refused (name an environment variable with
``api_key_env=VAR`` instead), since specs end up in logs, manifests and process lists. A user part in a URL
(``http://user:PASSWORD@host/v1``, in any form httpx accepts: ``me@corp.com:p@ss word``) is accepted and sent
as HTTP Basic auth exactly as httpx would send it, but ``redact`` masks it whole (and any ``api_key=``-like
value) wherever a spec is shown or stored: error messages, manifests, start-up lines; serve-judge serves a
model name, never its upstream's URL.
"""

from __future__ import annotations

import re
import threading
from dataclasses import fields
from typing import Any
from urllib.parse import unquote

from rewardkit.options import coerce_options

SECRET_OPTIONS = {"api_key"}

_SCHEME = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://")
_AUTHORITY_END = re.compile(r"[/?#\x00-\x1f\x7f]")  # httpx: the authority is [^/?#]*; it refuses control chars
_RUN_END = re.compile(r"[\s'\"<>]")  # where a URL written in running text ends at the latest
_OPENAI = re.compile(r"(.+?)@(https?://.*)", re.S | re.I)
# a spec, URL or path in running text: a quoted string (a spec's password may hold spaces), else a word
_TOKEN = re.compile(r"(?P<q>['\"`])(?P<inner>[^'\"`\n]*)(?P=q)|[^\s'\"<>`]+")
# what stays readable before a user part: a scheme with one or more slashes (``http:/``), a backend prefix, and
# ``KIND:NAME@`` before a URL (``openai:judge@http://...``, a model id ``http:judge@http://...``)
_PREFIX = re.compile(r"(?i)[a-z][a-z0-9+.-]*:/+|(?:hf|transformers|vllm|llamacpp|llama\.cpp):"
                     r"|(?:openai|https?|vllm|hf|transformers):[^@\s:/]*@(?=[a-z][a-z0-9+.()-]*:/)")
_QUERY = re.compile(r"[?#]([^?#]*)")
_URL_LIKE = re.compile(r"[/:]")  # a word with one of these before its '?' or '#' is read as a URL
_SEP = r"(?:_|-|%5f|%2d)?"
_SECRET_NAME = re.compile(  # a credential's name outside a URL's query (there every undeclared value is masked)
    rf"(?i)(?<![A-Za-z0-9_%-])(?P<key>(?:(?:api|access|secret|private|client){_SEP}key"
    rf"|(?:(?:access|auth|refresh|id|bearer|session|api){_SEP})?token"
    r"|password|passwd|pwd|secret|credential|signature)s?=)[^&#\s'\"]*")
_MIN_SECRET = 4  # a shorter remembered secret would mask ordinary words
_REMEMBERED: set[str] = set()
_DECLARED: set[str] = set()  # options every backend declares (``declare_options``): their values are shown
_LOCK = threading.Lock()


def user_part(url: str, start: int = 0) -> tuple[int, int] | None:
    """``(begin, end)`` of the user part (``user:password``, before its ``@``) of the URL in ``url`` whose scheme
    begins at ``start``, as httpx parses it: the authority runs from ``//`` to the first ``/``, ``?`` or ``#``,
    and its *last* ``@`` ends the user part (a login ``me@corp.com`` and a password ``p@ss word`` stay whole);
    None when the URL has none."""
    begin = url.index("://", start) + 3
    end = _AUTHORITY_END.search(url, begin)
    at = url.rfind("@", begin, end.start() if end else len(url))
    return (begin, at) if at >= 0 else None


def declare_options(cls: type) -> None:
    """Show the values of ``cls.Options``' options (``timeout``, ``model``, ``dtype``, ...) wherever a spec is
    redacted, secrets excepted. ``rewardkit.backends`` declares every backend's on import, so a spec redacts the
    same in any process, before or after it was parsed (a manifest written before the model loads matches one
    built after)."""
    names = [f.name for f in fields(cls.Options)]
    with _LOCK:
        _DECLARED.update(n for n in names if n not in SECRET_OPTIONS and not _SECRET_NAME.match(n + "="))


def _plain_options() -> frozenset[str]:
    """Query options whose values are shown: the options the backends declare (``declare_options``). Any other
    value (``auth_token``, ``api-key``, vLLM pass-through engine arguments) is masked."""
    with _LOCK:
        return frozenset(_DECLARED)


def _mask_query(q: str) -> str:
    """A query (or fragment) with every value masked but those of declared options, and bare tokens masked."""
    parts = []
    for part in re.split(r"([&;])", q):
        key, eq, val = part.partition("=")
        if part in ("&", ";", "") or (eq and (not val or unquote(key).lower().replace("-", "_") in _plain_options())):
            parts.append(part)
        else:
            parts.append(f"{key}=***" if eq else "***")
    return "".join(parts)


# in running text, ``NAME@WORD`` (no ``:`` in NAME; WORD a bare word: no dot, port or path) is a label (a model id
# and its engine/dtype: ``smollm2-135m-instruct@float32: cpu, ...``, ``...@vllm-float32`` in generated rows), not
# a user part before a host (``u:pw@host``, ``tok@host.example``, ``tok@host:8000``, ``tok@host/v1`` stay masked); a
# number ending the word is a metric's k (``pass@8``, ``maj@16)``: `eval select` printed "oracle ***@8)")
_LABEL_AT = re.compile(r"@(?:[A-Za-z_][A-Za-z0-9_-]*(?::(?![0-9/])|[,;)\]]*$)|[0-9]+[,;)\]]*$)")


def _mask_token(tok: str, running: bool = False) -> str:
    """A word of running text, a quoted string or a whole spec with a user part before an ``@`` masked whatever the
    scheme's form (``u:pw@host``, ``http:/u:pw@host``, ``HTTP://``, ``hf:http://``) and, in a URL-like word
    (a ``/`` or ``:`` before its first ``?`` or ``#``), every query or fragment value but a declared option's.
    ``running``: a word of running text, where ``NAME@WORD`` (a label) is kept."""
    head, rest = "", tok
    while m := _PREFIX.match(rest):
        head, rest = head + m.group(), rest[m.end():]
    at = rest.rfind("@")
    # in running text a label (NAME@WORD) is kept, but never after a scheme
    if at > 0 and not (running and "/" not in head and ":" not in rest[:at] and _LABEL_AT.match(rest, at)):
        rest = "***" + rest[at:]
    tok = head + rest
    q = tok.replace("#", "?").find("?")  # a query, or a fragment with none (``#TOKEN``, ``#key=...``)
    if q > 0 and _URL_LIKE.search(tok, 0, q):
        tok = tok[:q] + _QUERY.sub(lambda m: m.group()[0] + _mask_query(m.group(1)), tok[q:])
    return tok


def _mask_word(m: re.Match) -> str:
    """``_mask_token`` on one ``_TOKEN`` match: a quoted string as one word (quotes kept), else the word."""
    text = m.group("inner") if m.group("q") else m.group()
    if "@" not in text and "?" not in text and "#" not in text:
        return m.group()
    return f"{m.group('q')}{_mask_token(text, True)}{m.group('q')}" if m.group("q") else _mask_token(text, True)


def _secrets_in(spec: str) -> list[str]:
    """The user parts of ``spec`` (``user:password`` before an ``@``) that ``redact_patterns`` masks: what
    ``remember`` keeps. The masked text is walked against ``spec``: what lies between two shown pieces was
    masked; a masked span followed by ``@`` is a user part (a query value may be a model's name: left to the
    patterns, which mask it in a URL)."""
    pieces = redact_patterns(spec, whole=True).split("***")
    out, i = [], len(pieces[0])
    for n, piece in enumerate(pieces[1:], 1):
        k = len(spec) - len(piece) if n == len(pieces) - 1 else spec.find(piece, i)
        if k < i:
            break
        if spec.startswith("@", k):
            out.append(spec[i:k])
        i = k + len(piece)
    return out


def remember(spec: str) -> None:
    """Remember the secrets of a spec or URL this process was given (its user part and password), so that
    ``redact`` masks them wherever they show later, in whatever words (GitHub Actions' ``add-mask``)."""
    found = set()
    for s in _secrets_in(spec):
        found.add(s)
        found.add(unquote(s))
        if ":" in s:
            found.add(s.split(":", 1)[1])  # the password alone
            found.add(unquote(s.split(":", 1)[1]))
    with _LOCK:
        _REMEMBERED.update(x for x in found if len(x.strip()) >= _MIN_SECRET)


def redact_patterns(text: str, *, whole: bool = False) -> str:
    """``text`` with what looks like a credential masked (see ``redact``), remembered secrets aside. ``whole``:
    ``text`` is one spec (spaces and quotes in it are part of a password), not running text."""
    parts, pos = [], 0
    for m in _SCHEME.finditer(text):
        if m.start() < pos:  # inside a user part already masked
            continue
        span = user_part(text, m.start())
        run = _RUN_END.search(text, m.end())
        at = text.rfind("@", m.end(), run.start() if run else len(text))
        end = max(span[1] if span else -1, at)
        if end >= 0:
            parts += [text[pos:m.end()], "***"]
            pos = end
    parts.append(text[pos:])
    text = "".join(parts)
    text = _mask_token(text) if whole else _TOKEN.sub(_mask_word, text)
    return _SECRET_NAME.sub(lambda m: m.group("key") + "***", text)


def redact(text: str) -> str:
    """``text`` with every credential a judge spec or URL can carry masked: the one redaction, applied at every
    boundary (the CLI's stdout and stderr, log lines, tracebacks, manifests and reports).

    Masked: the user part of every URL (``http://***@host``: a login can be an e-mail address, a bare user part
    a token), read as httpx reads it (``user_part``) and also up to the last ``@`` before the URL's first space
    or quote, so a mistyped credential that httpx would refuse (``http://u:p/w@host``) is masked too; a user part
    before an ``@`` in any word, whatever the scheme's form (``u:pw@host/v1``, ``http:/u:pw@host``,
    ``hf:HTTP://u:pw@host``); every query or fragment value of a URL-like word but a declared option's
    (``?timeout=30`` stays, ``?auth_token=``, ``?api%5Fkey=``, a bare ``?TOKEN`` or ``#TOKEN`` go);
    ``api_key=``-like values anywhere; and every secret ``remember``-ed from a spec this process was given. In
    running text this may mask a little more than the credential, never less."""
    if not text:
        return text
    with _LOCK:
        known = sorted(_REMEMBERED, key=len, reverse=True)
    for s in known:
        text = text.replace(s, "***")
    return redact_patterns(text)


def shown_spec(spec: str) -> str:
    """``spec`` as an error quotes it: ``redact``-ed, and the query of a target that is not URL-like masked as a
    URL's is (``redact`` leaves a ``?`` in prose alone): every value but a declared option's, and bare words
    (``smollm2?sk-...`` shows ``smollm2?***``)."""
    target, q, query = spec.partition("?")
    if q and not _URL_LIKE.search(target):  # a URL-like word's query (and user part) redact masks itself
        return redact(target + q + _mask_query(query))
    return redact(spec)


def split_spec(spec: str) -> tuple[str, str, dict[str, str]]:
    """``(kind, target, raw string options)`` of a spec; kind is transformers, http, vllm or llamacpp."""
    remember(spec)
    s = spec.strip()
    if not s:
        raise ValueError("empty backend spec: use e.g. 'smollm2', 'http://127.0.0.1:8000/v1', 'vllm:MODEL'")
    if s.lower().startswith(("http://", "https://", "openai:")) and "#" in s:
        raise ValueError(f"backend spec {shown_spec(spec)!r}: a spec has no '#' part; name the model with '?model=NAME'")
    target, _, query = s.partition("?")
    opts = _query(spec, query)
    if target.lower().startswith(("http://", "https://")):  # a scheme is case-insensitive (RFC 3986 3.1)
        return "http", _with_host(spec, target), opts
    prefix, sep, rest = target.partition(":")
    if sep and prefix == "openai":
        m = _OPENAI.fullmatch(rest)  # the URL's own user part may hold '@': split before its scheme
        name, url = m.groups() if m else ("", "")
        if not name:
            raise ValueError(f"backend spec {shown_spec(spec)!r}: expected 'openai:MODEL@http(s)://HOST[:PORT]/v1'")
        _put(spec, opts, "model", name)
        return "http", _with_host(spec, url), opts
    if sep and prefix in ("vllm", "llamacpp", "llama.cpp", "hf", "transformers"):
        kind = {"llama.cpp": "llamacpp", "hf": "transformers"}.get(prefix, prefix)
        if not rest:
            raise ValueError(f"backend spec {shown_spec(spec)!r}: expected '{prefix}:MODEL'")
        return kind, rest, opts
    if not target:  # '?dtype=float32': the current folder was tried as a model
        raise ValueError(f"backend spec {shown_spec(spec)!r}: expected a model before '?' (e.g. 'smollm2?dtype=float32')")
    return "transformers", target, opts


def _with_host(spec: str, url: str) -> str:
    """``url`` when it names a host; 'http://' alone failed later as 'substring not found', 'http:///v1' or
    'http://:8000/v1' at the first request."""
    import httpx

    try:
        host = httpx.URL(url).host  # read as the client will send it
    except httpx.InvalidURL:  # a bad port, an unclosed bracket: left to the client, whose error names it
        return url
    if not host:
        raise ValueError(f"backend spec {shown_spec(spec)!r}: expected a host, as in 'http(s)://HOST[:PORT]/v1'")
    return url


def _query(spec: str, query: str) -> dict[str, str]:
    opts: dict[str, str] = {}
    for part in filter(None, query.split("&")):
        key, eq, val = part.partition("=")
        if not key or not eq or not val:
            got = repr(_mask_query(part)) if eq else "a part without '=' (not shown: it may be a secret)"
            raise ValueError(f"backend spec {shown_spec(spec)!r}: expected 'option=value' after '?', got {got}")
        _put(spec, opts, unquote(key), unquote(val))
    return opts


def _put(spec: str, opts: dict[str, str], key: str, val: str) -> None:
    if key in SECRET_OPTIONS:
        raise ValueError(f"backend spec {shown_spec(spec)!r}: a spec must not carry '{key}' (specs are logged); "
                         f"use api_key_env=VARIABLE or pass {key}= in Python")
    if key in opts:
        raise ValueError(f"backend spec {shown_spec(spec)!r}: option '{key}' is given twice")
    opts[key] = val


def backend_options(cls: type, raw: dict[str, str], spec: str = "") -> dict[str, Any]:
    """``raw`` string options typed and checked by ``cls.Options`` (``rewardkit.options``); ValueError otherwise.
    A backend with ``open_options`` (vLLM) passes options it does not declare through with guessed types."""
    declared = [f.name for f in fields(cls.Options)]
    where = f"backend spec {shown_spec(spec)!r}"
    unknown = [k for k in raw if k not in declared]
    if unknown and not cls.open_options:
        valid = ", ".join(sorted(declared))
        raise ValueError(f"{where}: unknown option '{unknown[0]}' for {cls.__name__} (options: {valid})")
    try:
        out = coerce_options(cls.Options, {k: v for k, v in raw.items() if k in declared}, where)
        cls.Options(**out)  # the option checks, before any model is loaded
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    out.update({k: _guess(raw[k]) for k in unknown})  # e.g. vLLM engine arguments
    return out


def _guess(val: str) -> Any:
    for conv in (lambda v: int(v, 10), float):
        try:
            return conv(val)
        except ValueError:
            pass
    low = val.lower()
    if low in ("true", "false"):
        return low == "true"
    return None if low in ("none", "null") else val

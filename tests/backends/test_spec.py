"""The judge spec grammar: ``TARGET?option=value&...`` typed from each backend's constructor."""

from __future__ import annotations

import pytest

from rewardkit.backends import load_backend, parse_spec
from rewardkit.backends.http import HTTPBackend
from rewardkit.backends.spec import shown_spec, split_spec

# ---- redaction, rule by rule (mutation survivors of spec.py's masking functions)
# isort: split

from dataclasses import dataclass

import rewardkit.backends.spec as spec_module
from rewardkit.backends.spec import declare_options, redact_patterns, remember, user_part


@pytest.fixture
def remembered(monkeypatch):
    """No secret remembered but this test's own: ``redact`` does not depend on which specs other tests parsed."""
    fresh: set[str] = set()
    monkeypatch.setattr(spec_module, "_REMEMBERED", fresh)
    return fresh


@pytest.mark.parametrize("url", [
    "http://me@corp.com:p@ss word@127.0.0.1:8000/v1",  # an e-mail login, '@' and a space in the password
    "https://alice@corp.com:Pa55word@corp.com",  # the login's domain is the host's
    "http://127.0.0.1:8000/v1?model=a@b",  # an '@' after the authority (in the query) is no user part
    "https://h/v1",
])
def test_user_part_is_the_login_and_password_httpx_sends(url):
    import httpx

    u = httpx.URL(url)
    span = user_part(url)
    assert (url[span[0]:span[1]] if span else None) == (f"{u.username}:{u.password}" if u.username else None)


@pytest.mark.parametrize("text,start,login", [
    ("http://h1/v1 http://u:pw@h2/v1", 13, "u:pw"),  # the second URL's, not the first's (none)
    ("http://u:pw@h1/v1 http://h2/v1", 0, "u:pw"),  # the first URL's, not the last's (none)
    ("http://u:pw@h1/v1 http://h2/v1", 18, None),
    ("://tok@h", 0, "tok"),  # text cut just before '://': the authority still starts after it
])
def test_user_part_reads_the_url_whose_scheme_begins_at_start(text, start, login):
    span = user_part(text, start) if start else user_part(text)
    assert (text[span[0]:span[1]] if span else None) == login


@pytest.mark.parametrize("text,shown", [
    # a space in a password ends a word, not the user part httpx reads: masked whole wherever the URL stands
    ("http://me:p ss@h/v1 timed out", "http://***@h/v1 timed out"),
    ("judge http://127.0.0.1:8000/v1 failed, trying http://me:p ss@h2/v1",
     "judge http://127.0.0.1:8000/v1 failed, trying http://***@h2/v1"),
    ("judge http://me:p ss@h1/v1 failed, trying http://127.0.0.1:8000/v1",
     "judge http://***@h1/v1 failed, trying http://127.0.0.1:8000/v1"),
    ("judge http://u:Pa55word@h1/v1 failed, trying http://me:p ss@h2/v1",
     "judge http://***@h1/v1 failed, trying http://***@h2/v1"),
    ("judge http://http://u:pw@h1/v1 failed, trying http://me:p ss@h2/v1",  # a doubled scheme before the first
     "judge http://***@h1/v1 failed, trying http://***@h2/v1"),
    # an '@' after the URL's first space belongs to other words: a label stays, an e-mail address is a user part
    ("judge http://h/v1 failed: smollm2-135m-instruct@float32: cpu", "judge http://h/v1 failed: smollm2-135m-instruct@float32: cpu"),
    ("judge http://h/v1 failed; ask admin@corp.com", "judge http://h/v1 failed; ask ***@corp.com"),
    # a mistyped credential httpx refuses ('/' in it): masked up to the last '@' before the URL's first space,
    # even before a host that reads like a label
    ("judge http://sk/abc123@judgehost: connection refused", "judge http://***@judgehost: connection refused"),
    ("judge http://k@y/Zm9v@judgehost: connection refused", "judge http://***@judgehost: connection refused"),
    # up to the last '@' before the URL's first space or quote, also where a backtick splits the word
    ("see http://u:p@host/a`b@c now", "see http://***@c now"),
    # no scheme: the user part before a word's last '@', one character or an e-mail login with a password
    ("judge me@corp.com:S3cret@judge.example.org/v1 failed", "judge ***@judge.example.org/v1 failed"),
    ("key k@judge.example.org/v1 refused", "key ***@judge.example.org/v1 refused"),
    ("    @functools.lru_cache(maxsize=None)", "    @functools.lru_cache(maxsize=None)"),  # nothing before the '@'
])
def test_redact_masks_each_user_part_in_running_text(text, shown):
    assert redact_patterns(text) == shown


@pytest.mark.parametrize("text,shown", [
    ("http://h/v1?sk-abc123", "http://h/v1?***"),  # a bare ?TOKEN
    ("http://h/v1?key=c2VjcmV0==", "http://h/v1?key=***"),  # a value with '=' in it (base64) masked whole
    ("http://h/v1?model=org=judge", "http://h/v1?model=org=judge"),  # a declared option's value shown whole
    ("http://h/v1?key=pass?word", "http://h/v1?key=***?***"),  # a '?' in a value begins another query part
    ("http://h/v1?timeout=30;retries=2", "http://h/v1?timeout=30;retries=2"),  # ';' separates like '&'
    ("http://h/v1?timeout=30&&retries=2", "http://h/v1?timeout=30&&retries=2"),  # an empty part
    ("http://h/v1?top-logprobs=5&api-key=abc", "http://h/v1?top-logprobs=5&api-key=***"),  # '-' reads as '_'
    ("GET /?key=abc123 HTTP/1.1", "GET /?key=*** HTTP/1.1"),  # a '/' before the '?' makes it a URL's query
    ("is 1+1=2?yes", "is 1+1=2?yes"),  # no '/' or ':' before the '?': a question, not a query
    ("is it 1/2?x=3/4", "is it 1/2?x=***"),  # the '/' before the '?' counts
    ("done?half=1/2", "done?half=1/2"),  # ... one after it does not: still a question
    ("http://h/v1#sk-abc123", "http://h/v1#***"),  # a bare #TOKEN: a fragment with no query
    ("http://h/v1#model=judge&key=abc", "http://h/v1#model=judge&key=***"),  # the legacy '#' spelling
    ("see issue #12", "see issue #12"),
])
def test_redact_masks_every_query_value_but_a_declared_options(text, shown):
    assert redact_patterns(text) == shown


def test_a_refused_fragment_does_not_show_its_token(remembered):
    """Before: ``backend spec 'http://h/v1#sk-abc123': a spec has no '#' part`` showed the token (a fragment
    without a query was not masked)."""
    with pytest.raises(ValueError, match="a spec has no '#' part") as e:
        split_spec("http://h/v1#sk-abc123")
    assert "sk-abc123" not in str(e.value) and "'http://h/v1#***'" in str(e.value)


@pytest.mark.parametrize("spec,shown", [
    ("http:/Tok3nXYZ@judgehost", "http:/***@judgehost"),  # in a spec, NAME@WORD is a user part, not a label
    ("Tok3nXYZ@judgehost", "***@judgehost"),
    ("hf:HTTP://u:p ss@h/v1?timeout=3&x=1", "hf:HTTP://***@h/v1?timeout=3&x=***"),
])
def test_a_whole_spec_masks_its_user_part_whatever_its_form(spec, shown):
    assert redact_patterns(spec, whole=True) == shown


@pytest.mark.parametrize("spec,text,shown", [
    ("http://me:Pa55word@h/v1", "the password Pa55word was refused", "the password *** was refused"),
    ("http:/me:pa ss@judge.example/v1", "password: pa ss", "password: ***"),  # one slash, a spaced password
    ("http:/Tok3nXYZ@judgehost", "retrying with Tok3nXYZ", "retrying with ***"),  # a bare token, a bare host
    ("https://alice@corp.com:Pa55word@corp.com", "password Pa55word", "password ***"),  # login at the host's domain
    ("http://u:Pa55word@h/v1?timeout=30&auth_token=Xyz789", "password Pa55word", "password ***"),
    ("http://me:p%40ss:w0rd@h/v1", "p%40ss:w0rd, p@ss:w0rd", "***, ***"),  # ':' in a password; decoded too
    ("http://me:Pa55@h/v1", "password Pa55", "password ***"),  # four characters: remembered
    ("http://me:abc@h/v1", "abc and me:abc", "abc and ***"),  # three: too short alone (ordinary words)
    # a model name holding credential-like parts masked before the URL: the user part is still found
    ("openai:token=a&token=&token=c&x@http://u:Pa55word@h/v1?x=1", "password Pa55word", "password ***"),
])
def test_remember_masks_a_given_specs_secrets_in_any_words(remembered, spec, text, shown):
    assert spec_module.redact(text) == text  # the patterns alone cannot see them
    remember(spec)
    assert spec_module.redact(text) == shown


def test_redact_replaces_the_longest_remembered_secret_first(remembered):
    """A password alone replaced before its whole user part would leave the login shown."""
    remember("http://Alice:pa55word@h1/v1")
    remember("http://bob:Zebra123@h2/v1")
    assert spec_module.redact("logins Alice:pa55word and bob:Zebra123") == "logins *** and ***"


def test_declare_options_shows_a_backends_options_but_secrets(monkeypatch):
    @dataclass
    class Options:
        model: str = ""
        timeout: float = 30.0
        api_key_env: str = ""  # names a variable: shown
        api_key: str = ""
        auth_token: str = ""

    class Backend:
        pass

    Backend.Options = Options
    monkeypatch.setattr(spec_module, "_DECLARED", set())
    declare_options(Backend)
    assert spec_module._DECLARED == {"model", "timeout", "api_key_env"}
    assert redact_patterns("http://h/v1?model=m&timeout=3&retries=2") == "http://h/v1?model=m&timeout=3&retries=***"


def test_http_timeouts_retries_and_deadline_from_the_spec():
    kind, kw = parse_spec("http://127.0.0.1:8000/v1?model=judge&timeout=30&retries=3&deadline=600&concurrency=4")
    assert kind == "http"
    assert kw == {"base_url": "http://127.0.0.1:8000/v1", "model": "judge", "timeout": 30.0, "retries": 3,
                  "deadline": 600.0, "concurrency": 4}
    assert type(kw["retries"]) is int and type(kw["timeout"]) is float
    assert parse_spec("http://h:1/v1?deadline=none")[1]["deadline"] is None
    assert parse_spec("http://h:1/v1?model=a%26b")[1]["model"] == "a&b"  # percent-decoded
    # the model-first form takes the same options
    assert parse_spec("openai:gpt-4o-mini@https://api.example.com/v1?timeout=5") == (
        "http", {"base_url": "https://api.example.com/v1", "model": "gpt-4o-mini", "timeout": 5.0})


def test_local_backends_take_options_through_the_same_grammar():
    assert parse_spec("smollm2?dtype=bfloat16&batch_size=4&share_prefix=false") == (
        "transformers", {"model": "smollm2", "dtype": "bfloat16", "batch_size": 4, "share_prefix": False})
    assert parse_spec("hf:Org/Name?num_threads=none") == ("transformers", {"model": "Org/Name", "num_threads": None})
    assert parse_spec("llamacpp:smollm2?n_ctx=4096") == ("llamacpp", {"model": "smollm2", "n_ctx": 4096})
    # vLLM forwards extra engine arguments: their values are read as literals
    assert parse_spec("vllm:Org/M?tensor_parallel_size=2&swap_space=1.5&enforce_eager=true") == (
        "vllm", {"model": "Org/M", "tensor_parallel_size": 2, "swap_space": 1.5, "enforce_eager": True})


@pytest.mark.parametrize("spec,message", [
    ("http://h:1/v1?retries=abc", "option 'retries': must be an integer"),
    ("http://h:1/v1?retries=1.5", "option 'retries': must be an integer"),
    ("http://h:1/v1?timeout=nan", "option 'timeout': must be a finite number"),
    ("http://h:1/v1?timeout=inf", "finite"),
    ("http://h:1/v1?tiemout=3", "unknown option 'tiemout' for HTTPBackend (options: "),
    ("http://h:1/v1?timeout=3&timeout=4", "given twice"),
    ("http://h:1/v1?timeout", "expected 'option=value'"),
    ("http://h:1/v1?timeout=", "expected 'option=value'"),
    ("http://h:1/v1?api_key=sk-123", "must not carry 'api_key'"),
    ("http://h:1/v1#model=m", "a spec has no '#' part; name the model with '?model=NAME'"),  # legacy spelling, gone
    ("http://h:1/v1?timeout=0", "option 'timeout': must be > 0"),  # the backend's option checks, no model load
    ("smollm2?dtype=fp8", "option 'dtype': must be one of auto, float32, bfloat16, float16, got 'fp8'"),
    ("smollm2?batch_size=four", "option 'batch_size': must be an integer"),
    ("smollm2?share_prefix=maybe", "option 'share_prefix': must be true or false"),
    ("smollm2?model=other", "'model=' is for URLs"),
    ("smollm2?n_ctx=4096", "unknown option 'n_ctx' for TransformersBackend"),
])
def test_bad_options_name_the_option(spec, message):
    with pytest.raises(ValueError, match="spec") as e:
        parse_spec(spec)
    assert message in str(e.value)


def test_options_reach_the_backend_and_are_validated():
    b = load_backend("http://127.0.0.1:9/v1?model=j&timeout=7&retries=0&deadline=20")
    assert isinstance(b, HTTPBackend) and (b.model, b.options.timeout, b.options.retries, b.options.deadline) == ("j", 7.0, 0, 20.0)
    for bad in ("timeout=0", "timeout=-1", "retries=-1", "concurrency=0", "deadline=0", "top_logprobs=21"):
        with pytest.raises(ValueError, match=f"option '{bad.split('=')[0]}'"):
            load_backend(f"http://127.0.0.1:9/v1?model=j&{bad}")
    with pytest.raises(ValueError, match="retries=0 but retries=2"):
        load_backend("http://127.0.0.1:9/v1?model=j&retries=0", retries=2)


def test_split_spec_keeps_paths_and_names():
    assert split_spec("/models/judge") == ("transformers", "/models/judge", {})
    assert split_spec("openai:a@b@https://h/v1") == ("http", "https://h/v1", {"model": "a@b"})


# ------------------------------------------------------------------ credentials are used, never shown or stored

import base64  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import httpx  # noqa: E402

from rewardkit.backends.spec import redact  # noqa: E402
from rewardkit.http_server import BackgroundServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# every user-part form httpx accepts, each with a login and a password marker: the forms the probe counts
sys.path.insert(0, str(ROOT / "benchmarks"))
from reliability_probe import FORMS, LOGIN, MARKER, recording_judge  # noqa: E402

CLI = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]


def test_redact_masks_url_passwords_tokens_and_key_parameters():
    assert redact(f"http://user:{MARKER}@h:8/v1?model=m") == "http://***@h:8/v1?model=m"
    assert redact(f"judge at https://{MARKER}@h/v1 failed") == "judge at https://***@h/v1 failed"
    assert redact(f"http://h/v1?timeout=3&api_key={MARKER}&x=1") == "http://h/v1?timeout=3&api_key=***&x=***"
    assert redact(f"openai:gpt@http://u:{MARKER}@h/v1") == "openai:gpt@http://***@h/v1"
    for plain in ("smollm2?dtype=bfloat16", "http:judge@http://127.0.0.1:8000/v1", "vllm:Org/Model"):
        assert redact(plain) == plain


def test_a_spec_redacts_the_same_in_a_fresh_process_before_and_after_it_is_parsed():
    """Before: only the options of backends whose specs this process had parsed were shown, so `eval generate`
    claimed its output with `vllm:M?dtype=***` before the model loaded and found `dtype=float32` after, and
    refused its own claim (CI, vLLM's CPU build). Declared options show from the start; others stay masked."""
    code = ("from rewardkit.backends.spec import redact\n"
            "from rewardkit.backends import parse_spec\n"
            "s = 'vllm:m?dtype=float32&max_model_len=2048&swap_space=4'\n"
            "u = 'http://h/v1?timeout=3&retries=2&auth_token=T'\n"
            "before = [redact(s), redact(u)]\n"
            "parse_spec(s); parse_spec('http://h/v1?timeout=3&retries=2')\n"
            "print(before == [redact(s), redact(u)], *before, sep='\\n')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "vllm:m?dtype=float32&max_model_len=2048&swap_space=***",
                                "http://h/v1?timeout=3&retries=2&auth_token=***"]


def _everything_under(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_password_in_a_judge_url_is_sent_as_auth_and_appears_in_no_output(tmp_path):
    """Before: written to OUT.manifest.json, printed by serve-judge at start-up, returned in /v1/models and in
    every completion's `model`; an `api_key=` refused in a spec was printed in the refusal."""
    seen: list = []
    with BackgroundServer(recording_judge(seen)) as up:
        # an e-mail login, '@' and a space in the password: the form `redact` cut short before
        url = f"http://me.{LOGIN}@corp.com:p@ss {MARKER}@127.0.0.1:{up.url.rsplit(':', 1)[1]}/v1"
        spec = f"{url}?retries=0&timeout=20"
        inp = tmp_path / "in.jsonl"
        inp.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2", "3"]}) + "\n")
        out = tmp_path / "out" / "scores.jsonl"
        shown = []
        r = subprocess.run([*CLI, "score", str(inp), "--scorer", "pointwise", "--judge", spec, "--out", str(out)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        shown += [r.stdout, r.stderr]
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert set(rows[0]["statuses"]) <= {"ok", "invalid"}  # the judge was reached and answered (no error)
        assert "http://***@127.0.0.1" in json.loads((out.parent / "scores.jsonl.manifest.json").read_text())["judge"]
        shown.append(out.parent.joinpath("scores.jsonl.manifest.json").read_text())

        proc = subprocess.Popen([*CLI, "serve-judge", spec, "--port", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        try:
            first = proc.stdout.readline()
            while not first.startswith("serving"):  # start-up lines ("judge: ...") before it
                shown.append(first)
                first = proc.stdout.readline()
            shown.append(first)
            url = re.findall(r"http://127\.0\.0\.1:\d+/v1", first)[-1]  # the served URL ends the line
            models = httpx.get(url + "/models", timeout=30)
            chat = httpx.post(url + "/chat/completions", timeout=60,
                              json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
            assert models.status_code == 200 and chat.status_code == 200, chat.text
            shown += [models.text, chat.text, json.dumps(dict(models.headers)), json.dumps(dict(chat.headers))]
        finally:
            proc.terminate()
            shown.append(proc.communicate(timeout=30)[0])

        refused = subprocess.run([*CLI, "score", str(inp), "--scorer", "pointwise", "--out", str(tmp_path / "o2.jsonl"),
                                  "--judge", f"http://127.0.0.1:9/v1?api_key={MARKER}"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)
        assert "must not carry 'api_key'" in refused.stderr  # refused (each group's row says so too)
        shown += [refused.stdout, refused.stderr]

    basic = "Basic " + base64.b64encode(f"me.{LOGIN}@corp.com:p@ss {MARKER}".encode()).decode()
    assert seen and set(seen) == {basic}  # the credential still reaches the judge it belongs to
    assert MARKER not in "\n".join(shown) and LOGIN not in "\n".join(shown)
    assert MARKER not in _everything_under(tmp_path) and LOGIN not in _everything_under(tmp_path)


@pytest.mark.parametrize("info", FORMS.values(), ids=FORMS.keys())
def test_redact_masks_the_whole_user_part_of_every_form_httpx_accepts(info):
    """Before: the user part ended at its first '@' or space, so `me@corp.com:PW@host` kept the password."""
    for url in (f"http://{info}@127.0.0.1:8000/v1", f"https://{info}@[::1]/v1?model=m", f"HTTP://{info}@h"):
        u = httpx.URL(url)  # a form httpx accepts, with this user part
        assert MARKER in u.password + u.username or LOGIN in u.username, url
        assert u.host in ("127.0.0.1", "::1", "h")
        for text in (url, f"backend spec {url!r}: bad", f"openai:judge@{url}", json.dumps({"judge": url}),
                     f"{url} failed\nthen {url}"):
            shown = redact(text)
            assert MARKER not in shown and LOGIN not in shown, shown
            assert "***@" in shown and u.host.strip("[]") in shown  # the host stays readable


@pytest.mark.parametrize("info", FORMS.values(), ids=FORMS.keys())
def test_every_url_form_sends_what_httpx_sends_and_shows_no_credential(tmp_path, caplog, info):
    """Before: the manifest kept `PW@REST`, `corp.com:PASSWORD` or a spaced password in clear, and serve-judge
    listed the upstream's URL as its model id. Checked against real servers on 127.0.0.1: the Basic auth the
    judge receives equals what httpx itself sends for the same URL, and no login or password appears in the
    manifest, the rows, the CLI's error line, any log record, serve-judge's /v1/models, completions or error
    bodies."""
    import logging

    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    from rewardkit.backends.server import JudgeServer
    from rewardkit.runtime.jobs import score_file
    from rewardkit.scoring import get_scorer

    caplog.set_level(logging.DEBUG)
    seen: list = []
    shown: list[str] = []
    with BackgroundServer(recording_judge(seen)) as up:
        url = f"http://{info}@127.0.0.1:{up.url.rsplit(':', 1)[1]}/v1"
        assert httpx.get(url + "/models", timeout=20).status_code == 200  # httpx's own request: the reference
        reference = seen.pop()
        caplog.clear()  # httpx logs the URL it was given, credentials included: rewardkit never gives it them
        assert reference and reference.startswith("Basic ")
        spec = f"{url}?retries=0&timeout=20"

        inp = tmp_path / "in.jsonl"
        inp.write_text(json.dumps({"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2", "3"]}) + "\n")
        out = tmp_path / "scores.jsonl"
        score_file(inp, get_scorer("pointwise", judge=spec), out, options={"judge": spec})
        assert set(json.loads(out.read_text())["statuses"]) <= {"ok", "invalid"}  # the judge was reached

        r = CliRunner().invoke(app, ["score", str(inp), "--scorer", "pointwise", "--out", str(tmp_path / "o2.jsonl"),
                                     "--judge", spec, "--device", "cpu"])  # refused, naming the spec
        assert r.exit_code == 2 and "apply to a local transformers judge" in r.output, r.output
        assert "***@127.0.0.1" in r.output
        shown.append(r.output)

        with JudgeServer(HTTPBackend(url, retries=0, timeout=20), port=0) as srv:  # over the credentialed upstream
            models = httpx.get(srv.url + "/models", timeout=20)
            ok = httpx.post(srv.url + "/chat/completions", timeout=60,
                            json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
            bad = httpx.post(srv.url + "/chat/completions", timeout=60,
                             json={"messages": [{"role": "user", "content": "FAIL"}], "max_tokens": 4})
        assert models.status_code == 200 and ok.status_code == 200 and bad.status_code == 500, bad.text
        assert "upstream broke" in bad.text and "127.0.0.1" in bad.text  # the error says where, not who
        served = models.json()["data"][0]
        assert served["id"] == served["root"] == "judge" and "127.0.0.1" not in models.text
        with JudgeServer(load_backend(spec + "&model=upstream-judge"), port=0) as srv:
            named = httpx.get(srv.url + "/models", timeout=20).json()["data"][0]
        assert named["id"] == "upstream-judge"  # the upstream's model name once known, no URL
        shown += [models.text, ok.text, bad.text, json.dumps(named)]

    assert seen and set(seen) == {reference}  # every request the judge got carried httpx's own credentials
    shown += [rec.getMessage() for rec in caplog.records]
    assert MARKER not in "\n".join(shown) and LOGIN not in "\n".join(shown)
    assert MARKER not in _everything_under(tmp_path) and LOGIN not in _everything_under(tmp_path)


def test_a_model_label_in_running_text_is_not_taken_for_a_user_part():
    """The judge line names the model and its dtype (``NAME@DTYPE:``): not a credential; a user:password before an
    ``@`` is masked even when a colon follows the host."""
    from rewardkit.backends.spec import redact

    line = "judge: smollm2-135m-instruct@float32: cpu, float32, 4,096 tokens per scoring pass"
    assert redact(line) == line
    assert redact('"model": "smollm2-135m-instruct@vllm-float32"') == '"model": "smollm2-135m-instruct@vllm-float32"'
    assert redact("tok3n@judge.example.org/v1") == "***@judge.example.org/v1"
    assert redact("judge u:S3cret@host: no such model folder") == "judge ***@host: no such model folder"
    assert "S3cret" not in redact("judge 'u:S3cret@host': no such model folder")


# ---- the spec grammar, rule by rule (mutation survivors of spec.py's parsing functions)

from rewardkit.backends.llamacpp_backend import LlamaCppBackend  # noqa: E402
from rewardkit.backends.spec import backend_options  # noqa: E402

HTTP_OPTIONS = ("api_key_env, backoff, concurrency, deadline, max_backoff, max_retry_after, model, requests_per_minute, retries, seed, "
                "timeout, tokens_per_minute, top_logprobs")  # HTTPOptions' fields, sorted


@pytest.mark.parametrize("spec,expected", [
    # a URL, whatever the case of its scheme (RFC 3986 3.1): the target kept as written
    ("http://127.0.0.1:8000/v1?model=judge&timeout=30",
     ("http", "http://127.0.0.1:8000/v1", {"model": "judge", "timeout": "30"})),
    ("https://api.example.com/v1?timeout=5", ("http", "https://api.example.com/v1", {"timeout": "5"})),
    ("HTTPS://api.example.com/v1", ("http", "HTTPS://api.example.com/v1", {})),
    # model first: the name becomes the model option
    ("openai:gpt-4o-mini@https://api.openai.com/v1?timeout=20",
     ("http", "https://api.openai.com/v1", {"timeout": "20", "model": "gpt-4o-mini"})),
    # backend prefixes, and their aliases: llama.cpp is llamacpp, hf and transformers are transformers
    ("vllm:Qwen/Qwen2.5-7B-Instruct?tensor_parallel_size=2",
     ("vllm", "Qwen/Qwen2.5-7B-Instruct", {"tensor_parallel_size": "2"})),
    ("llamacpp:/models/judge.gguf?n_ctx=4096", ("llamacpp", "/models/judge.gguf", {"n_ctx": "4096"})),
    ("llama.cpp:/models/judge.gguf?n_ctx=4096", ("llamacpp", "/models/judge.gguf", {"n_ctx": "4096"})),
    ("hf:HuggingFaceTB/SmolLM2-135M-Instruct", ("transformers", "HuggingFaceTB/SmolLM2-135M-Instruct", {})),
    ("transformers:HuggingFaceTB/SmolLM2-135M-Instruct?dtype=bfloat16",
     ("transformers", "HuggingFaceTB/SmolLM2-135M-Instruct", {"dtype": "bfloat16"})),
    # no prefix: a model name, hub id or folder, even one whose name holds a ':' (a timestamped checkpoint)
    ("smollm2?dtype=bfloat16&batch_size=4", ("transformers", "smollm2", {"dtype": "bfloat16", "batch_size": "4"})),
    ("/ckpt/run-2026-11-28T08:00:00/judge", ("transformers", "/ckpt/run-2026-11-28T08:00:00/judge", {})),
    # a part splits at its first '=' (the value keeps the rest); then both sides are percent-decoded
    ("http://127.0.0.1:8000/v1?model=org/judge=v2", ("http", "http://127.0.0.1:8000/v1", {"model": "org/judge=v2"})),
    ("http://127.0.0.1:8000/v1?model=a%26b&time%6fut=30",
     ("http", "http://127.0.0.1:8000/v1", {"model": "a&b", "timeout": "30"})),
])
def test_the_target_picks_the_backend_and_the_query_its_options(spec, expected):
    assert split_spec(spec) == expected


URL = "http://127.0.0.1:8000/v1"
SAYS = "expected 'option=value' after '?', got"


@pytest.mark.parametrize("spec,message", [
    # a '#' part (the old '#model=' spelling) in any URL form
    ("https://api.example.com/v1#model=judge",
     "backend spec 'https://api.example.com/v1#model=judge': a spec has no '#' part; name the model with '?model=NAME'"),
    (f"openai:judge@{URL}#model=judge",
     f"backend spec 'openai:judge@{URL}#model=judge': a spec has no '#' part; name the model with '?model=NAME'"),
    # openai: without '@http(s)://...', and a prefix without a model
    ("openai:gpt-4o-mini", "backend spec 'openai:gpt-4o-mini': expected 'openai:MODEL@http(s)://HOST[:PORT]/v1'"),
    ("openai:", "backend spec 'openai:': expected 'openai:MODEL@http(s)://HOST[:PORT]/v1'"),
    ("vllm:", "backend spec 'vllm:': expected 'vllm:MODEL'"),
    ("llama.cpp:", "backend spec 'llama.cpp:': expected 'llama.cpp:MODEL'"),
    # a part that is not option=value: a bare word is not quoted back (it may be a token), nor is a nameless value
    (f"{URL}?model=judge&timeout",
     f"backend spec '{URL}?model=judge&***': {SAYS} a part without '=' (not shown: it may be a secret)"),
    (f"{URL}?timeout=", f"backend spec '{URL}?timeout=': {SAYS} 'timeout='"),
    (f"{URL}?=30", f"backend spec '{URL}?=***': {SAYS} '=***'"),
    # a repeated option, also the model of openai:NAME@URL given again after '?'
    ("smollm2?dtype=bfloat16&dtype=float32", "backend spec 'smollm2?dtype=bfloat16&dtype=float32': option 'dtype' is given twice"),
    (f"{URL}?timeout=30&timeout=60", f"backend spec '{URL}?timeout=30&timeout=60': option 'timeout' is given twice"),
    (f"openai:judge@{URL}?model=other", f"backend spec 'openai:judge@{URL}?model=other': option 'model' is given twice"),
    # a secret, however spelled, refused without being shown
    (f"{URL}?api_key=sk-abc123", f"backend spec '{URL}?api_key=***': a spec must not carry 'api_key' (specs are "
                                 "logged); use api_key_env=VARIABLE or pass api_key= in Python"),
    (f"{URL}?api%5Fkey=sk-abc123", f"backend spec '{URL}?api%5Fkey=***': a spec must not carry 'api_key' (specs are "
                                   "logged); use api_key_env=VARIABLE or pass api_key= in Python"),
])
def test_a_malformed_spec_is_refused_naming_the_spec_and_the_part(spec, message):
    with pytest.raises(ValueError) as e:
        split_spec(spec)
    assert str(e.value) == message


@pytest.mark.parametrize("spec,message", [
    # an unknown option lists the backend's options (its Options class' fields, sorted); its value is masked
    ("llamacpp:/models/judge.gguf?n_gpu_layers=99", "backend spec 'llamacpp:/models/judge.gguf?n_gpu_layers=***': "
                                                    "unknown option 'n_gpu_layers' for LlamaCppBackend (options: n_ctx, n_threads, seed)"),
    (f"{URL}?model=judge&tiemout=30",
     f"backend spec '{URL}?model=judge&tiemout=***': unknown option 'tiemout' for HTTPBackend (options: {HTTP_OPTIONS})"),
    # a value of the wrong type, or refused by the options' own checks
    ("smollm2?batch_size=four", "backend spec 'smollm2?batch_size=four': option 'batch_size': must be an integer, got 'four'"),
    ("vllm:Org/M?dtype=fp8",
     "backend spec 'vllm:Org/M?dtype=fp8': option 'dtype': must be one of auto, float32, bfloat16, float16, got 'fp8'"),
    (f"{URL}?timeout=0", f"backend spec '{URL}?timeout=0': option 'timeout': must be > 0, got 0.0"),
])
def test_a_bad_option_is_refused_naming_the_spec_the_option_and_the_valid_ones(spec, message):
    with pytest.raises(ValueError) as e:
        parse_spec(spec)
    assert str(e.value) == message


def test_backend_options_without_a_spec_still_names_the_option():
    """A caller with options but no spec (the default ``spec=""``) gets the same message, quoting an empty spec."""
    assert backend_options(LlamaCppBackend, {"n_ctx": "4096"}) == {"n_ctx": 4096}
    with pytest.raises(ValueError) as e:
        backend_options(LlamaCppBackend, {"n_gpu_layers": "99"})
    assert str(e.value) == "backend spec '': unknown option 'n_gpu_layers' for LlamaCppBackend (options: n_ctx, n_threads, seed)"


@pytest.mark.parametrize("arg,expected", [
    ("max_num_seqs=16", 16),  # decimal
    ("max_num_seqs=-1", -1),
    ("swap_space=1.5", 1.5),
    ("enforce_eager=false", False),
    ("enforce_eager=True", True),
    ("quantization=none", None),
    ("quantization=NULL", None),
    ("quantization=awq", "awq"),
    ("tokenizer_mode=mistral", "mistral"),
])
def test_vllm_engine_arguments_pass_through_as_literals(arg, expected):
    """vLLM takes engine arguments its Options do not declare: an int, a float, true/false, none/null (any case),
    else the string itself."""
    name = arg.split("=")[0]
    kind, kw = parse_spec(f"vllm:Qwen/Qwen2.5-7B-Instruct?{arg}")
    assert kind == "vllm" and kw == {"model": "Qwen/Qwen2.5-7B-Instruct", name: expected}
    assert type(kw[name]) is type(expected)


@pytest.mark.parametrize(("spec", "shown"), [
    ("smollm2?sk-live-4f9a2b7c", "'smollm2?***': expected 'option=value' after '?', got a part without '='"),
    ("vllm:m?sk-live-4f9a2b7c", "'vllm:m?***': expected 'option=value' after '?', got a part without '='"),
    ("smollm2?dtype=float32&token2=sk-live-4f9a2b7c", "'smollm2?dtype=float32&token2=***': unknown option 'token2'"),
    ("smollm2?api_key=sk-live-4f9a2b7c", "'smollm2?api_key=***': a spec must not carry 'api_key'"),
    # the query begins at the first '?': a later one is part of a value
    ("smollm2?dtype=float32&token2=sk-live-4f9a2b7c?x", "'smollm2?dtype=float32&token2=***': unknown option 'token2'"),
])
def test_an_error_quotes_a_spec_with_its_query_masked_whatever_its_target(spec, shown):
    """A query of a spec that is not URL-like was quoted as written: the error said a bare part is 'not shown: it
    may be a secret' and showed it in the spec beside it. Declared options' values stay readable."""
    with pytest.raises(ValueError) as e:
        parse_spec(spec)
    assert f"backend spec {shown}" in str(e.value) and "4f9a2b7c" not in str(e.value), e.value


def test_a_url_spec_is_quoted_as_redact_reads_a_url():
    # a '?' in the password belongs to the user part (httpx): the query is the one after the host
    assert shown_spec("http://L0gin:pa?ss@judgehost/v1?timeout=30") == "http://***@judgehost/v1?timeout=30"
    assert shown_spec("http://judgehost/v1?timeout=30&tok=sk-live-4f9a2b7c") == "http://judgehost/v1?timeout=30&tok=***"


@pytest.mark.parametrize(("text", "shown"), [
    ("judge at http:/Tok3nXYZ@judgehost failed", "judge at http:/***@judgehost failed"),
    ("judge at HTTPS:/Tok3nXYZ@judgehost: refused", "judge at HTTPS:/***@judgehost: refused"),
    ("model smollm2-135m-instruct@float32: cpu", "model smollm2-135m-instruct@float32: cpu"),  # a label stays
    ("rows of vllm:smollm2@vllm-float32, 8 each", "rows of vllm:smollm2@vllm-float32, 8 each"),
])
def test_a_token_after_a_one_slash_scheme_is_never_read_as_a_label(text, shown):
    """``NAME@WORD`` in running text is a label (a model and its engine) unless a URL's scheme stands before it:
    ``http:/TOKEN@host`` (one slash, a bare host) was shown whole before its spec had been parsed."""
    assert redact(text) == shown


@pytest.mark.parametrize(("text", "shown"), [
    ("oracle (pass@8) 96.0%", "oracle (pass@8) 96.0%"),  # `rewardkit eval select` printed "oracle ***@8) 96.0%"
    ("maj@16, pass@1 and rm@8]", "maj@16, pass@1 and rm@8]"),
    ("judge tok3n@8/v1 failed", "judge ***@8/v1 failed"),  # a number before a path, port or dot is a host
    ("judge tok3n@10.0.0.1 failed", "judge ***@10.0.0.1 failed"),
    ("judge tok3n@8:8000 failed", "judge ***@8:8000 failed"),
    ("judge u:pw@8 failed", "judge ***@8 failed"),  # a user:password is masked before any host
    ("see http://tok3n@8 now", "see http://***@8 now"),  # ... and so is any user part after a scheme
])
def test_a_metrics_k_after_an_at_is_a_label_in_running_text(text, shown):
    assert redact(text) == shown


@pytest.mark.parametrize(("spec", "message"), [
    ("http://", "backend spec 'http://': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),  # was 'substring not found'
    ("HTTPS:///?timeout=3", "backend spec 'HTTPS:///?timeout=3': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),
    ("openai:judge@http://", "backend spec 'openai:judge@http://': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),
    # a path or a port but no host: accepted, then failed at the first request
    ("http:///v1", "backend spec 'http:///v1': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),
    ("http://:8000/v1", "backend spec 'http://:8000/v1': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),
    ("http://://h/v1", "backend spec 'http://://h/v1': expected a host, as in 'http(s)://HOST[:PORT]/v1'"),
    # the current folder was tried as a model: "judge '': the folder has no config.json"
    ("?dtype=float32", "backend spec '?dtype=float32': expected a model before '?' (e.g. 'smollm2?dtype=float32')"),
])
def test_a_spec_without_a_host_or_model_is_refused_naming_what_is_missing(spec, message):
    with pytest.raises(ValueError) as e:
        split_spec(spec)
    assert str(e.value) == message


@pytest.mark.parametrize("url", ["http://X", "http://X/", "https://[::1]:8000/v1", "openai:m@http://h:8000/v1"])
def test_a_one_letter_host_an_ipv6_host_and_an_openai_spec_are_hosts(url):
    assert split_spec(url)[0] == "http"

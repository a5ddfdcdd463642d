"""Secrets redacted at the boundary (issue 35): every judge spec form that carries a credential, fed through
every command that takes a spec (score, eval generate, eval verifier, serve-judge, serve) as real subprocesses
against a real judge on 127.0.0.1, on their error and success paths: the login and password show in no
stdout, stderr, log line, HTTP body or written file (manifests, rows, reports)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rewardkit.backends.spec import redact, redact_patterns
from rewardkit.http_server import BackgroundServer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from reliability_probe import GUARD_FORMS, LOGIN, MARKER, SPEC_FORMS, recording_judge, spec_form_outputs  # noqa: E402


@pytest.fixture(scope="module")
def upstream():
    """A real OpenAI-compatible judge on 127.0.0.1 (its port goes into every spec)."""
    with BackgroundServer(recording_judge([])) as up:
        yield up.url.rsplit(":", 1)[1]


@pytest.mark.slow
@pytest.mark.parametrize("form", SPEC_FORMS.values(), ids=SPEC_FORMS.keys())
def test_no_command_shows_a_credential_of_any_spec_form(tmp_path, upstream, form, monkeypatch):
    """Before: a spec that fell through to the local-model path was printed whole, twice (the error and its
    `hf download` hint); a '?' in a password printed its tail; query-string secrets were echoed."""
    monkeypatch.chdir(ROOT)  # the CLI subprocesses run this checkout
    spec = form.format(port=upstream)
    assert MARKER in spec
    shown = spec_form_outputs(spec, tmp_path)
    assert set(shown) == {"score", "eval generate", "eval verifier", "serve-judge", "serve", "files"}
    leaks = {where: [x for x in text.splitlines() if MARKER in x or LOGIN in x][:3] for where, text in shown.items()}
    assert not any(leaks.values()), leaks
    assert all(shown[c].startswith("exit ") for c in ("score", "eval generate", "eval verifier"))


@pytest.mark.parametrize("form", [*SPEC_FORMS.values(), *GUARD_FORMS.values()],
                         ids=[*SPEC_FORMS, *GUARD_FORMS])
def test_redact_masks_every_spec_form_and_keeps_the_host(form):
    spec = form.format(port=18431)
    bare = [spec] if " " not in spec else []  # a space in running text ends a word: see the remembered secrets
    for text in (*bare, f"judge {spec!r}: no such model folder", json.dumps({"judge": spec}), f"`hf download {spec}`"):
        shown = redact_patterns(text)  # the patterns alone, no secret remembered from a parsed spec
        assert MARKER not in shown and LOGIN not in shown, shown
        assert "127.0.0.1" in shown


def test_query_values_are_masked_but_declared_options_stay():
    """Every value of a URL's query is masked, names percent-decoded, but the options a backend declares
    (once a spec of that backend was parsed; before, they are masked too)."""
    from rewardkit.backends import parse_spec

    parse_spec("http://h/v1?timeout=1")
    assert redact("http://h/v1?timeout=30&model=judge&retries=2") == "http://h/v1?timeout=30&model=judge&retries=2"
    assert redact("http://h/v1?timeout=30&auth_token=abc") == "http://h/v1?timeout=30&auth_token=***"
    assert redact("http://h/v1?api%5Fkey=abc") == "http://h/v1?api%5Fkey=***"
    assert redact("http://h/v1?abcdef") == "http://h/v1?***"
    assert redact("http://h/v1#access_token=abc") == "http://h/v1#access_token=***"
    for plain in ("expected KEY=VALUE, got 'x'", "Is it 2? yes", "max_tokens=4096", "@[implemented_by f]",
                  "openai:MODEL@http(s)://HOST[:PORT]/v1", "http:judge@http://127.0.0.1:8000/v1"):
        assert redact(plain) == plain


def test_a_secret_of_a_parsed_spec_is_masked_in_any_words():
    """A credential the patterns cannot see in running text (a space splits a schemeless user part) is masked
    once the spec it came from was parsed."""
    from rewardkit.backends.spec import split_spec

    secret = "p4ss w0rd-Rem3mbered"
    text = f"judge 'u:{secret}@127.0.0.1:1/v1' failed; the password was {secret}"
    assert secret in redact_patterns(text)
    split_spec(f"u:{secret}@127.0.0.1:1/v1")
    assert secret not in redact(text) and "127.0.0.1:1/v1" in redact(text)


def test_the_cli_streams_redact_what_any_code_prints(capsys):
    """Whatever a command prints (rich, typer.echo, a log line, a traceback) crosses the redacted streams."""
    import logging

    from rewardkit.cli.common import redacted_output

    with redacted_output():
        print(f"plain http://u:{MARKER}@h/v1", end="")
        sys.stdout.flush()  # an unfinished line is redacted too
        print(f" and on\nnext u:{MARKER}@h/v1")
        # the CLI configures no log handler: a rewardkit log line reaches logging's last resort, sys.stderr
        logging.lastResort.handle(logging.makeLogRecord({"msg": "upstream http://127.0.0.1/v1?auth_token=%s",
                                                         "args": (MARKER,), "levelno": logging.ERROR}))
        try:
            raise RuntimeError(f"judge 'hf:http://u:{MARKER}@h/v1'")
        except RuntimeError:
            import traceback

            traceback.print_exc()
    out, err = capsys.readouterr()
    assert MARKER not in out + err and "plain http://***@h/v1" in out and "next ***@h/v1" in out
    assert "auth_token=***" in err and "RuntimeError: judge 'hf:http://***@h/v1'" in err

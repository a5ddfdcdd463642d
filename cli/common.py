"""What every ``rewardkit`` command shares: one error line (``OneLineErrors`` for every command), ``KEY=VALUE``
lists, options read from an options class, the local-judge options and the judge check, and tables printed in full.

The local-judge options (``--device``, ``--dtype``, ``--batch-tokens``, ``--threads``; score, tts,
processbench, serve-judge, eval, train) are folded into the judge spec's query
(``smollm2?device=cpu&dtype=bfloat16&batch_tokens=8192``), so manifests and logs record them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import io
import os
import sys
import threading
import time
import traceback
import typing
from collections.abc import Callable
from dataclasses import MISSING, fields
from typing import Annotated, Any, Optional
from urllib.parse import quote

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text
from typer.core import TyperGroup
from typer.exceptions import TyperException

from rewardkit.backends.base import DTYPES
from rewardkit.backends.spec import redact
from rewardkit.options import Options, coerce_options, option_hints, type_name


def fail(message: object, code: int = 2) -> typer.Exit:
    """Print ``error: message`` as one line on stderr (never wrapped, piped or not; redacted); return the exit."""
    sys.stderr.write(redact("error: " + " ".join(str(message).split())) + "\n")
    sys.stderr.flush()
    return typer.Exit(code)


#: exceptions that are a programming error, not a user's: their traceback is kept for the bug report
BUGS = (AttributeError, NameError, AssertionError, SyntaxError, ZeroDivisionError)  # NotImplementedError is not one:
# backends raise it with advice for users ("use the transformers backend or vllm:")


def error_message(e: BaseException) -> str:
    """What ``error:`` says for an exception: a KeyError's own text unquoted, an OSError's file and reason."""
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    return str(e) or type(e).__name__


class RedactedStream(io.TextIOBase):
    """A text stream that writes what it is given through ``redact``, a line at a time (a credential is never
    cut in two; a flush passes on the unfinished line): the CLI's stdout and stderr while a command runs."""

    def __init__(self, inner: typing.TextIO) -> None:
        self.inner = inner
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")  # click then writes text
        with self._lock:
            head, sep, self._pending = (self._pending + s).rpartition("\n")
            if sep:
                self.inner.write(redact(head + sep))
        return len(s)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self.inner.write(redact(self._pending))
                self._pending = ""
        self.inner.flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)


@contextlib.contextmanager
def redacted_output() -> typing.Iterator[None]:
    """While it lasts, everything written to ``sys.stdout`` and ``sys.stderr`` (rich, typer, log lines, warnings,
    tracebacks) passes through ``redact``: the boundary every judge spec or URL crosses to be shown."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = RedactedStream(saved[0]), RedactedStream(saved[1])
    try:
        yield
    finally:
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                s.flush()
        sys.stdout, sys.stderr = saved


#: click's base of parser errors (vendored as typer._click in newer typers, the click package in older ones)
ClickException: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def usage_message(e: Any) -> str:
    """A parser error (missing argument, unknown option, bad value) as one line, naming where help is."""
    msg = e.format_message().strip().rstrip(".")
    msg = msg[:1].lower() + msg[1:]
    ctx = getattr(e, "ctx", None)
    return f"{msg} (see '{ctx.command_path} --help')" if ctx is not None else msg


class OneLineErrors(TyperGroup):
    """The one place every command's errors go through: an exception a command lets out (a scorer name with a
    typo, a port in use, a judge that cannot load, a bad file) is one ``error:`` line on stderr and exit code 2,
    never a traceback. Programming errors (``BUGS``) keep theirs; ``REWARDKIT_TRACEBACK=1`` shows every one.
    Parser errors (a missing argument, ``--bogus``, a value out of range) are one ``error:`` line too, not
    typer's boxed usage text. Everything a command prints, its errors and tracebacks included, is redacted
    (``redacted_output``)."""

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        with redacted_output():
            if not standalone_mode:
                return super().main(*args, standalone_mode=False, **kwargs)
            try:
                rv = super().main(*args, standalone_mode=False, **kwargs)
            except ClickException as e:
                if not e.format_message().strip():  # no arguments: the help is the answer (no_args_is_help)
                    e.show()
                    raise SystemExit(getattr(e, "exit_code", 2)) from None
                raise SystemExit(fail(usage_message(e), getattr(e, "exit_code", 2)).exit_code) from None
            except typer.Abort:
                sys.stderr.write("Aborted!\n")
                raise SystemExit(1) from None
            except Exception:  # a traceback (BUGS, REWARDKIT_TRACEBACK): shown here, through the redaction
                traceback.print_exc()
                raise SystemExit(1) from None
            raise SystemExit(rv if isinstance(rv, int) else 0)

    def invoke(self, ctx: typer.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (TyperException, typer.Exit, typer.Abort):  # usage errors and exits: typer reports them
            raise
        except BUGS:
            raise
        except Exception as e:
            if os.environ.get("REWARDKIT_TRACEBACK"):
                raise
            raise fail(error_message(e)) from None


def quiet_progress_bars() -> None:
    """No model-loading progress bars (Hugging Face's tqdm: "Loading weights", downloads) where stderr is
    not a terminal: in a log file each redraw is another line. ``HF_HUB_DISABLE_PROGRESS_BARS=0`` keeps them."""
    if sys.stderr.isatty() or os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") is not None:
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when huggingface_hub / transformers are imported
    if "huggingface_hub" in sys.modules:  # already imported: switch them off at run time too
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def check_judge_spec(spec: str, *, load: bool = True, label: str = "judge") -> Any:
    """Check a judge (or any backend) spec before the first piece of work (``rewardkit.backends.check_judge``):
    a spec that names no model, or a server that does not answer, is one ``error:`` line and exit 2 at start,
    not an error status per group. Returns the loaded backend (None when only located)."""
    from rewardkit.backends import check_judge

    try:
        backend = check_judge(spec, load=load)
    except ValueError as e:
        raise fail(e) from None
    if backend is not None:  # what the defaults chose (device, dtype, budgets), said once
        typer.echo(f"{label}: {backend.describe()}", err=True)
    return backend


def check_scorer_judge(scorer: object, *, load: bool = True) -> None:
    """Check a judge scorer's judge before its first group (``check_judge_spec``)."""
    spec = getattr(getattr(scorer, "options", None), "judge", None)
    if spec is not None:
        check_judge_spec(spec, load=load)


def parse_pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    """``["a=1", "b-c=x"]`` -> ``{"a": "1", "b_c": "x"}`` (values stay strings; ``rewardkit.options.coerce``
    types them); ``typer.BadParameter`` naming ``flag`` for an item without ``=``."""
    out = {}
    for p in items or []:
        if "=" not in p:
            raise typer.BadParameter(f"expected KEY=VALUE, got {p!r}", param_hint=flag)
        k, v = p.split("=", 1)
        out[k.strip().replace("-", "_")] = v
    return out


def csv(s: str) -> list[str]:
    """The non-empty items of a comma-separated list."""
    return [x.strip() for x in s.split(",") if x.strip()]


def with_options(cls: type[Options], panel: str | None = None) -> Callable[[Callable], Callable]:
    """Give a command one ``--field`` per field of ``cls`` (help, default and choices read from the field)
    and call it with ``options=cls(...)``.

    Values are typed by ``rewardkit.options.coerce`` (as ``-o key=value`` and judge specs are) and checked
    by ``cls``; a bad value is one ``error:`` line and exit code 2. Booleans are ``--x/--no-x`` flags.
    """
    hints = option_hints(cls)

    def deco(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        own = typing.get_type_hints(fn, include_extras=True)
        params = [p.replace(annotation=own[p.name]) for p in sig.parameters.values() if p.name != "options"]
        added = []
        for f in fields(cls):
            t, flag = hints[f.name], "--" + f.name.replace("_", "-")
            default = f.default if f.default is not MISSING else None
            if t is bool:
                ann: Any = Annotated[bool, typer.Option(f"{flag}/--no-{flag[2:]}", help=f.metadata["help"],
                                                        rich_help_panel=panel)]
            else:
                shown = ",".join(map(str, default)) if isinstance(default, tuple) else str(default)
                ann = Annotated[Optional[str], typer.Option(flag, help=f.metadata["help"], metavar=type_name(t),
                                                            show_default=shown, rich_help_panel=panel)]
                default = None  # not given: the field's default
            added.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
        names = {p.name for p in added}

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            given = {k: kwargs.pop(k) for k in names if k in kwargs}
            try:
                opts = cls(**coerce_options(cls, {k: v for k, v in given.items() if v is not None}))
            except (TypeError, ValueError) as e:
                raise fail(e) from None
            return fn(*args, options=opts, **kwargs)

        command.__signature__ = sig.replace(parameters=[*params, *added])  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in [*params, *added]}
        return command

    return deco


Port = Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port, 0-65535 (0 picks a free one).")]
#: ``--field FIELD=COLUMN`` (score, eval accuracy / verifier / select, tts): the input's own column names
FieldMap = Annotated[Optional[list[str]], typer.Option("--field", help="FIELD=COLUMN: read FIELD (prompt, response(s), "
                     "reference, expert, correct, group_id, id, step) from your COLUMN (repeatable).")]

# ------------------------------------------------------------------------------------- local judge

Device = Annotated[Optional[str], typer.Option(
    "--device", help="Local judge: torch device (auto, cpu, cuda, cuda:1). Default auto: the GPU when torch sees one.",
    rich_help_panel="Local judge")]
DType = Annotated[Optional[str], typer.Option(
    "--dtype", help=f"Local judge: {', '.join(DTYPES)} (default auto: bfloat16 on a GPU and where the CPU has it).",
    rich_help_panel="Local judge")]
BatchTokens = Annotated[Optional[int], typer.Option(
    "--batch-tokens", min=1, help="Local judge: tokens per forward pass (rows x padded length). Default: 4096 on a CPU, "
         "from the model's size and the free memory on a GPU.",
    rich_help_panel="Local judge")]
Threads = Annotated[Optional[int], typer.Option(
    "--threads", min=1, help="Local judge: torch CPU threads. Default: the idle cores (1 on a busy 2-core box).",
    rich_help_panel="Local judge")]


def option_judge(options: dict[str, str], judge: str | None, flag: str = "-o") -> str | None:
    """``-o judge=SPEC`` (``flag``: ``--set`` for train) read as ``--judge SPEC`` (taken out of ``options``), so the
    local-judge options apply to it and neither ``--judge`` nor the default judge replaces it without a word; both,
    naming two judges, is a ``typer.BadParameter``."""
    spec = options.pop("judge", None)
    if spec is None:
        return judge
    if judge is not None and judge != spec:
        raise typer.BadParameter(f"{flag} judge={redact(spec)} and --judge {redact(judge)} name two judges; give one",
                                 param_hint="--judge")
    return spec


def judge_spec(spec: str | None, device: str | None = None, dtype: str | None = None,
               batch_tokens: int | None = None, threads: int | None = None, *, default: str | None = "smollm2",
               flag: str = "--judge", scorer: str | None = None) -> str | None:
    """``spec`` with the local-judge options added to its query (``spec`` None: ``default``, when any is set).

    Raises ``typer.BadParameter`` for options on a judge that is not a local transformers model, an option
    the spec already sets, a value the backend's options reject (checked by ``parse_spec``, no model load), or
    options set for a registered ``scorer`` that takes no judge.
    """
    from rewardkit.backends import parse_spec
    from rewardkit.backends.spec import split_spec
    from rewardkit.integrations.common import takes_judge
    from rewardkit.scoring import scorer_names

    opts = {"device": device, "dtype": dtype, "batch_tokens": batch_tokens, "num_threads": threads}
    opts = {k: v for k, v in opts.items() if v is not None}
    if not opts:
        return spec
    names = ", ".join("--" + k.replace("num_threads", "threads").replace("_", "-") for k in opts)
    if spec is None and scorer in scorer_names() and not takes_judge(scorer):
        raise typer.BadParameter(f"scorer {scorer!r} takes no judge, so no local judge runs to use it",
                                 param_hint=names)
    spec = spec if spec is not None else default
    if spec is None:
        raise typer.BadParameter(f"{names} set but no local judge is used", param_hint=flag)
    try:
        kind, _, raw = split_spec(spec)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint=flag) from None
    if kind != "transformers":
        raise typer.BadParameter(f"{names} apply to a local transformers judge, not {redact(spec)!r} ({kind}); "
                                 "set that backend's options in its spec", param_hint=flag)
    twice = sorted(set(opts) & set(raw))
    if twice:
        raise typer.BadParameter(f"the spec {redact(spec)!r} already sets {', '.join(twice)}", param_hint=flag)
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in opts.items())
    out = spec + ("&" if "?" in spec else "?") + query
    try:
        parse_spec(out)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint=flag) from None
    return out


def print_table(console: Console, table: Table | str) -> None:
    """Show a rich ``Table`` (or a Markdown text) in full.

    On a terminal it is drawn at the terminal's width. Piped, rich would assume 80 columns and cut cells
    ("scor…"); instead a table becomes plain tab-separated lines (title, header, rows) and Markdown is
    written as is.
    """
    if console.is_terminal:
        console.print(Markdown(table) if isinstance(table, str) else table)
        return
    if isinstance(table, str):
        lines = table.splitlines()
    else:
        def plain(x: object) -> str:
            return x.plain if isinstance(x, Text) else Text.from_markup(str(x)).plain

        lines = [plain(table.title)] if table.title else []
        if table.show_header:
            lines.append("\t".join(plain(c.header) for c in table.columns))
        cells = [list(c.cells) for c in table.columns]
        lines += ["\t".join(plain(col[i]) for col in cells) for i in range(table.row_count)]
    console.file.write("".join(line + "\n" for line in lines))  # as is: rich would expand the tabs
    console.file.flush()


# ------------------------------------------------------------------------------------------- progress

#: a plain progress line at most this often (seconds), except the last
PROGRESS_INTERVAL = 5.0
#: with nothing finished for this long (seconds), a plain line says the job is still working
HEARTBEAT_SECONDS = 15.0


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class JobProgress:
    """Progress of a long job (``score``, ``eval``'s scoring and generation) on ``console`` (stderr).

    On a terminal, rich's bar. Otherwise (a log file, a pipe, CI), where a bar is not drawn, a plain line when
    items finish, at most one per ``PROGRESS_INTERVAL`` seconds, and always the last:
    ``score verifier: 400/800 groups (50%), 12.5 groups/s, ETA 32s``. The rate counts only the work done in
    this run (a resumed job's finished items are not in it). Scoring reports groups as they finish
    (``rewardkit.runtime.pacing``), so a slow judge's log shows one line per group, not one per batch; while
    one item takes longer than ``HEARTBEAT_SECONDS``, a line says so every ``HEARTBEAT_SECONDS`` (``tick``,
    called by a background thread).
    """

    def __init__(self, label: str, console: Console, unit: str = "groups",
                 clock: Callable[[], float] = time.monotonic, heartbeat: bool = True) -> None:
        self.label, self.console, self.unit, self.clock = label, console, unit, clock
        self.heartbeat = heartbeat  # the background thread calling tick (off where a test drives the clock)
        self.total: int | None = None
        self.done = self.first = 0
        self.t0 = self.last = clock()
        self.bar: Progress | None = None
        self.lock = threading.Lock()
        self.started = False  # start() was called: the heartbeat may speak
        self.since = self.t0  # when an item last finished
        self.stop = threading.Event()
        self.beat: threading.Thread | None = None
        if console.is_terminal:
            self.bar = Progress(TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), TimeRemainingColumn(), console=console)
            self.task = self.bar.add_task(label, total=None)

    def __enter__(self) -> JobProgress:
        if self.bar is not None:
            self.bar.__enter__()
        elif self.heartbeat:
            self.beat = threading.Thread(target=self._beat, name="rewardkit-progress", daemon=True)
            self.beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        if self.beat is not None:
            self.beat.join()
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def _beat(self) -> None:
        while not self.stop.wait(1.0):
            self.tick()

    def tick(self) -> None:
        """A line saying the job works on, when a started job has shown nothing for ``HEARTBEAT_SECONDS``."""
        with self.lock:
            now = self.clock()
            if self.started and now - self.last >= HEARTBEAT_SECONDS:
                self.last = now
                self.console.print(f"{self.line(now)}, working: none finished for {_duration(now - self.since)}",
                                   soft_wrap=True, highlight=False, markup=False)

    def start(self, total: int | None, done: int = 0) -> None:
        """The job's size and the items already done (a resumed job); the clock starts here."""
        self.total, self.done, self.first = total, done, done
        self.t0 = self.last = self.since = self.clock()
        self.started = True
        if self.bar is not None:
            self.bar.update(self.task, total=total, completed=done)

    def advance(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.advance(self.task, n)
            return
        with self.lock:
            now = self.since = self.clock()
            final = self.total is not None and self.done >= self.total
            if final or now - self.last >= PROGRESS_INTERVAL:
                self.last = now
                self.console.print(self.line(now), soft_wrap=True, highlight=False, markup=False)

    def line(self, now: float) -> str:
        """``label: done/total unit (pct), rate unit/s, ETA t`` (the parts that are known)."""
        elapsed = max(now - self.t0, 1e-9)
        rate = (self.done - self.first) / elapsed
        parts = [f"{self.label}: {self.done}" + (f"/{self.total}" if self.total else "") + f" {self.unit}"]
        if self.total:
            parts[0] += f" ({self.done / self.total:.0%})"
        speed = f"{rate:,.0f}" if rate >= 1000 else f"{rate:.3g}"  # never "1.2e+03"
        parts.append(f"{speed} {self.unit}/s" if rate >= 0.1 or rate == 0 else f"{1 / rate:.3g} s per {self.unit[:-1]}")
        if self.total and rate > 0:
            left = self.total - self.done
            parts.append(f"ETA {_duration(left / rate)}" if left else f"took {_duration(elapsed)}")
        return ", ".join(parts)

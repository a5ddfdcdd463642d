"""``JobOutput``, the one owner of a job's ``--out`` (``score`` and ``eval generate``): a path that names a folder
is refused creating nothing; rows done, appends, the retry journal and its atomic merge keep one row per id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.runtime.output import (
    JobError,
    JobOutput,
    lock_path,
    manifest_path,
    output_manifest,
    retry_path,
)

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); import conftest; "
       "from rewardkit.cli.app import main; main()", str(ROOT)]


def _listing(folder: Path) -> list:
    return sorted((str(p.relative_to(folder)), p.is_dir(), p.read_bytes() if p.is_file() else None)
                  for p in folder.rglob("*"))


class _Scripted:
    name = "scripted"

    def score(self, groups):
        from rewardkit.types import GroupScore, Status

        return [GroupScore(g.id, [1.0] * len(g), [Status.OK] * len(g)) for g in groups]


@pytest.mark.parametrize("raw", ["nd1/x/", "nd1/x/.", "nd1/x//", "x/"])
def test_a_path_that_names_a_folder_is_refused_and_nothing_is_created(tmp_path, raw):
    """Before: `--out nd1/x/` created nd1/ and wrote a file `x` (pathlib drops the trailing '/')."""
    from rewardkit.runtime.jobs import score_file

    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "a", "prompt": "p", "responses": ["r"]}) + "\n")
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="names a folder|is a directory"):
        score_file(inp, _Scripted(), f"{tmp_path}/{raw}")
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", [["score", "in.jsonl"], ["eval", "generate", "smollm2", "aime24", "--limit", "1"]])
def test_cli_out_with_a_trailing_slash_is_one_error_line_and_exit_2(tmp_path, command):
    """Before: `rewardkit score in.jsonl --out nd1/x/` exited 0 and wrote the file nd1/x. (Run from the checkout,
    with absolute paths: mutmut's mutated code finds its configuration from the working folder.)"""
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "a", "prompt": "p", "responses": ["r"]}) + "\n")
    before = _listing(tmp_path)
    command = [str(tmp_path / c) if c == "in.jsonl" else c for c in command]
    r = subprocess.run([*CLI, *command, "--out", f"{tmp_path}/nd1/x/"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert r.stderr.splitlines() == [f"error: {tmp_path}/nd1/x/: names a folder (a path ending in '/', '.' or '..'); "
                                     "--out must be a file"]
    assert _listing(tmp_path) == before  # no nd1/, no x


def test_rows_done_appends_and_the_retry_merge_keep_one_row_per_id(tmp_path):
    out = tmp_path / "sub" / "o.jsonl"
    m = output_manifest("score", "scripted", {}, None, None)
    made = []
    with JobOutput(out, m).claim().open(on_mkdir=made.append) as o:
        assert made == [tmp_path / "sub"] and manifest_path(out).exists() and lock_path(out).exists()
        assert o.done() == {}
        o.append([{"id": "a", "v": 1}, {"id": "b", "v": 1}])
    assert not lock_path(out).exists()
    out.write_bytes(out.read_bytes() + b'{"id": "c", "v"')  # a kill half-way through a line
    with JobOutput(out, m).claim().open() as o:
        assert o.done() == {"a": {"id": "a", "v": 1}, "b": {"id": "b", "v": 1}}
        o.append([{"id": "a", "v": 2}], journal=True)  # a retry: into the journal, never into OUT
        assert [json.loads(x)["id"] for x in out.read_text().splitlines()] == ["a", "b"]
        assert json.loads(retry_path(out).read_text()) == {"id": "a", "v": 2}
        rows = o.merge(["b", "a"])
    assert rows == [{"id": "b", "v": 1}, {"id": "a", "v": 2}]
    assert [json.loads(x) for x in out.read_text().splitlines()] == rows and not retry_path(out).exists()


def test_another_jobs_output_and_a_foreign_file_are_refused_untouched(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, output_manifest("generate", None, {"n": 1}, None, None)).claim().open() as o:
        o.append([{"id": "a"}])
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="written by another job"):
        JobOutput(out, output_manifest("generate", None, {"n": 2}, None, None)).claim()
    with pytest.raises(JobError, match="written by another job: job"):  # a score job on a rollouts file
        JobOutput(out, output_manifest("score", None, {"n": 1}, None, None)).claim()
    assert _listing(tmp_path) == before
    (tmp_path / "mine.jsonl").write_bytes(b'{"id": "mine-1"}')
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="not a rewardkit output"):
        JobOutput(tmp_path / "mine.jsonl", output_manifest("generate", None, {}, None, None)).claim()
    assert _listing(tmp_path) == before


# ------------------------------------------------------------------------------------ side files and kinds


def test_side_files_are_named_after_out_in_its_folder(tmp_path):
    from rewardkit.runtime.output import beside, rejects_path, side_files

    out = tmp_path / "run" / "o.jsonl"
    assert beside(str(out), ".x") == tmp_path / "run" / "o.jsonl.x"
    assert rejects_path(out) == tmp_path / "run" / "o.jsonl.rejects.jsonl"
    assert manifest_path(out) == tmp_path / "run" / "o.jsonl.manifest.json"
    assert lock_path(out) == tmp_path / "run" / "o.jsonl.lock"
    assert retry_path(out) == tmp_path / "run" / "o.jsonl.retry.jsonl"
    assert JobOutput(out, {}).journal == retry_path(out)
    assert side_files(out) == (rejects_path(out), retry_path(out), manifest_path(out))


def test_file_kind_names_what_is_there_and_follows_links_only_when_asked(tmp_path):
    import os
    import socket

    from rewardkit.runtime.output import file_kind

    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(tmp_path / "sock"))
        assert file_kind(tmp_path / "sock") == "socket"
    finally:
        s.close()
    assert file_kind(tmp_path / "f") == "regular file"
    assert file_kind(tmp_path / "d") == "directory"
    assert file_kind(tmp_path / "fifo") == "named pipe (FIFO)"
    assert file_kind(tmp_path / "link") == "symbolic link"  # not followed by default
    assert file_kind(tmp_path / "link", follow=True) == "regular file"
    assert file_kind(tmp_path / "dangling") == "symbolic link"
    assert file_kind(tmp_path / "dangling", follow=True) is None
    assert file_kind(tmp_path / "missing") is None
    assert file_kind("/dev/null") == "character device"
    if os.path.exists("/dev/loop0"):
        assert file_kind("/dev/loop0") == "block device"


# ------------------------------------------------------------------------------------ atomic rewrites


def test_write_atomic_replaces_the_file_whole_and_leaves_no_staging_file(tmp_path):
    import os

    from rewardkit.runtime.output import fsync_dir, temp_path, write_atomic

    p = tmp_path / "o.jsonl"
    p.write_bytes(b"old contents, longer than the new\n")
    write_atomic(p, b"new\n")
    assert p.read_bytes() == b"new\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["o.jsonl"]
    assert temp_path(p) == tmp_path / f".o.jsonl.rewardkit-{os.getpid()}.tmp"
    fsync_dir(tmp_path)  # a folder can be fsync'd (no error)


def test_write_atomic_that_fails_leaves_the_old_file_and_no_staging_file(tmp_path):
    from rewardkit.runtime.output import write_atomic

    d = tmp_path / "o.jsonl"
    d.mkdir()  # os.replace(file, folder) fails: the rename never happens
    with pytest.raises(OSError):
        write_atomic(d, b"new\n")
    assert d.is_dir() and sorted(x.name for x in tmp_path.iterdir()) == ["o.jsonl"]


def test_stale_temp_files_are_only_the_staging_files_of_that_path(tmp_path):
    from rewardkit.runtime.output import stale_temp_files

    p = tmp_path / "o.jsonl"
    names = [".o.jsonl.rewardkit-123.tmp", ".o.jsonl.99999.tmp",  # this release's and older releases' staging
             ".o.jsonl.rewardkit-abc.tmp", ".oXjsonl.1.tmp", "x.o.jsonl.1.tmp", ".o.jsonl.1.tmp.bak",
             ".o.jsonl.manifest.json.1.tmp", "o.jsonl"]
    for n in names:
        (tmp_path / n).write_text("x")
    (tmp_path / ".o.jsonl.rewardkit-5.tmp").mkdir()  # a folder of that name is not ours
    (tmp_path / ".o.jsonl.6.tmp").symlink_to(tmp_path / "o.jsonl")  # nor a link
    assert sorted(x.name for x in stale_temp_files(p)) == [".o.jsonl.99999.tmp", ".o.jsonl.rewardkit-123.tmp"]
    assert stale_temp_files(tmp_path / "missing" / "o.jsonl") == []


def test_append_lines_appends_the_lines_whole_and_creates_nothing_for_none(tmp_path):
    from rewardkit.runtime.output import append_lines

    p = tmp_path / "o.jsonl"
    append_lines(p, [])
    assert not p.exists()
    append_lines(p, [b"1\n", b"2\n"])
    append_lines(p, iter([b"3\n"]))
    assert p.read_bytes() == b"1\n2\n3\n"


def test_dump_row_is_one_utf8_line_and_escapes_a_lone_surrogate():
    from rewardkit.runtime.output import dump_row

    assert dump_row({"id": "é", "r": [1.5]}) == '{"id": "é", "r": [1.5]}\n'.encode()
    assert dump_row({"t": "a\ud800b"}) == b'{"t": "a\\ud800b"}\n'
    assert json.loads(dump_row({"t": "a\ud800b"})) == {"t": "a\ud800b"}


# ------------------------------------------------------------------------------------ repair


def test_repair_cuts_only_the_half_written_last_line(tmp_path):
    from rewardkit.runtime.output import repair_jsonl

    p = tmp_path / "o.jsonl"
    assert repair_jsonl(p) == [] and not p.exists()
    p.write_bytes(b'{"id": "a"}\n\n{"id": "b"}\n{"id": "c"}\n{"id": "d", "r')
    assert repair_jsonl(p) == [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    assert p.read_bytes() == b'{"id": "a"}\n\n{"id": "b"}\n{"id": "c"}\n'
    p.write_bytes(b'{"id": "a"')  # killed in the first line: nothing was written whole
    assert repair_jsonl(p) == [] and p.read_bytes() == b""


def test_repair_leaves_a_complete_file_untouched(tmp_path):
    import os

    from rewardkit.runtime.output import repair_jsonl

    p = tmp_path / "o.jsonl"
    p.write_bytes(b'{"id": "a"}\n{"id": "b"}\n')
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    assert repair_jsonl(p) == [{"id": "a"}, {"id": "b"}]
    assert p.read_bytes() == b'{"id": "a"}\n{"id": "b"}\n' and p.stat().st_mtime_ns == 1_000_000_000


@pytest.mark.parametrize("line, why", [(b"{nope}", "is corrupt"), (b"[" * 100_000, "is corrupt"),
                                       (b"[1, 2]", "is not a JSON object")])
def test_a_corrupt_complete_line_names_its_line_and_is_left_as_it_is(tmp_path, line, why):
    from rewardkit.runtime.output import repair_jsonl

    p = tmp_path / "o.jsonl"
    data = b'{"id": "a"}\n\n' + line + b'\n{"id": "b"}\n{"id'
    p.write_bytes(data)
    with pytest.raises(JobError, match=f"^{p}:3: existing output line {why}"):
        repair_jsonl(p)
    assert p.read_bytes() == data


# ------------------------------------------------------------------------------------ the manifest


def test_input_digest_of_a_file_is_its_sha256(tmp_path):
    from rewardkit.runtime.output import input_digest

    p = tmp_path / "in.jsonl"
    p.write_bytes(b"abc")  # FIPS 180-2's example
    assert input_digest(p) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    big = (b"0123456789abcdef" * (1 << 16)) * 3 + b"tail"  # 3 MiB and a bit: read in several chunks
    p.write_bytes(big)
    import hashlib

    assert input_digest(str(p)) == hashlib.sha256(big).hexdigest()


def test_input_digest_reads_a_large_input_in_bounded_chunks(tmp_path, monkeypatch):
    """A multi-gigabyte rollouts file is hashed without being read into memory whole."""
    import builtins

    import rewardkit.runtime.output as output
    from rewardkit.runtime.output import input_digest

    p = tmp_path / "in.jsonl"
    p.write_bytes(b"x" * (3 << 20))
    sizes = []

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

    monkeypatch.setattr(output, "open", lambda *a, **k: Counting(builtins.open(*a, **k)), raising=False)
    input_digest(p)
    assert len(sizes) >= 3 and all(isinstance(n, int) and 0 < n < (3 << 20) for n in sizes)


def test_input_digest_of_a_folder_covers_every_files_name_and_contents(tmp_path):
    import hashlib
    import os

    from rewardkit.runtime.output import input_digest

    def folder(name, files):
        d = tmp_path / name
        for rel, data in files.items():
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / rel).write_bytes(data)
        return d

    files = {f"f{i:02d}": bytes([i]) * i for i in range(20)} | {"sub/x.json": b"{}"}
    a = folder("a", files)
    b = folder("b", dict(reversed(list(files.items()))))  # the same files, made in the other order
    # each file's relative name, a NUL, then its contents, in sorted order of the names (the documented form)
    want = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in sorted(files.items()))).hexdigest()
    assert input_digest(a) == input_digest(b) == want
    # the NUL between name and contents: ("a", "bc") and ("ab", "c") are different folders
    assert input_digest(folder("c", {"a": b"bc"})) != input_digest(folder("d", {"ab": b"c"}))
    # a name that is not valid UTF-8 is hashed by its bytes
    e = tmp_path / "e"
    e.mkdir()
    fd = os.open(os.fsencode(e) + b"/\xff", os.O_WRONLY | os.O_CREAT)
    os.write(fd, b"1")
    os.close(fd)
    assert input_digest(e) == hashlib.sha256(b"\xff\x001").hexdigest()


def test_plain_shows_option_values_comparably_and_masks_credentials():
    from rewardkit.runtime.output import _plain

    class Spec:
        spec = "http://user:pw@host/v1"

    class Served:
        model_id = "org/model"

    class Bare:
        spec = 5  # not a spec string

    assert _plain(None) is None and _plain(True) is True and _plain(False) is False and _plain(3) == 3
    assert _plain(1.5) == 1.5 and _plain(float("inf")) == "inf" and _plain(float("-inf")) == "-inf"
    assert _plain(float("nan")) == "nan"
    assert _plain("http://user:pw@host/v1") == "http://***@host/v1" and _plain("plain") == "plain"
    assert _plain((1, [2.0, "x"])) == [1, [2.0, "x"]]
    assert _plain({1: {"k": float("inf")}}) == {"1": {"k": "inf"}}
    assert _plain(Spec()) == "http://***@host/v1"
    qual = f"{__name__}.test_plain_shows_option_values_comparably_and_masks_credentials.<locals>"
    assert _plain(Served()) == f"{qual}.Served:org/model"
    assert _plain(Bare()) == f"{qual}.Bare"
    assert json.loads(json.dumps(_plain({"a": [float("nan"), Served()]}))) == {"a": ["nan", f"{qual}.Served:org/model"]}


def test_scorer_config_reads_the_options_dataclass_else_the_options_given():
    import dataclasses

    from rewardkit.runtime.output import scorer_config

    @dataclasses.dataclass
    class Opts:
        temperature: float = 0.5
        judge: str = "http://u:p@h/v1"

    class WithOptions:
        options = Opts()

    class WithOptionsClass:
        options = Opts  # the class itself, not an instance: not read

    class Plain:
        pass

    assert scorer_config(WithOptions(), {"ignored": 1}) == {"judge": "http://***@h/v1", "temperature": 0.5}
    assert list(scorer_config(WithOptions())) == ["judge", "temperature"]
    assert scorer_config(WithOptionsClass(), {"b": 2, "a": (1,)}) == {"a": [1], "b": 2}
    assert list(scorer_config(Plain(), {"b": 2, "a": 1})) == ["a", "b"]
    assert scorer_config(Plain()) == {} and scorer_config(Plain(), None) == {}


def test_job_manifest_records_the_scorer_options_and_input(tmp_path, monkeypatch):
    from rewardkit.runtime.output import job_manifest
    from rewardkit.version import __version__

    class Unnamed:
        pass

    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"abc")
    monkeypatch.chdir(tmp_path)  # a relative input path is recorded resolved
    m = job_manifest(Unnamed(), "in.jsonl", options={"judge": "http://k:s@h/v1", "n": 2}, fmt="jsonl",
                     group_key="prompt", fields={"prompt": "question"}, with_texts=True)
    assert m == {"rewardkit_output": 1, "rewardkit_version": __version__, "job": "score", "scorer": "Unnamed",
                 "options": {"judge": "http://***@h/v1", "n": 2}, "judge": "http://***@h/v1",
                 "input": {"path": str(inp.resolve()),
                           "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
                 "format": "jsonl", "group_key": "prompt", "fields": {"prompt": "question"}, "with_texts": True}
    import dataclasses

    @dataclasses.dataclass
    class Opts:
        judge: str = "vllm:m"
        k: int = 4

    class WithOptions:
        name = "w"
        options = Opts()

    m = job_manifest(WithOptions(), inp, options={"ignored": 1}, digest="d" * 64)
    assert (m["scorer"], m["options"], m["judge"]) == ("w", {"judge": "vllm:m", "k": 4}, "vllm:m")
    m = job_manifest(_Scripted(), inp, digest="d" * 64)
    assert (m["scorer"], m["input"]["sha256"], m["judge"], m["format"], m["group_key"], m["fields"],
            m["with_texts"]) == ("scripted", "d" * 64, None, None, None, None, None)


def test_output_manifest_names_an_existing_input_by_its_resolved_path_and_a_stream_as_given(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("x")
    (tmp_path / "link.jsonl").symlink_to(inp)
    assert output_manifest("score", "s", {}, tmp_path / "link.jsonl", "x")["input"] == {"path": str(inp.resolve()),
                                                                                       "sha256": "x"}
    assert output_manifest("score", "s", {}, "-", "y")["input"] == {"path": "-", "sha256": "y"}
    assert output_manifest("generate", None, {}, None, None)["input"] == {"path": None, "sha256": None}
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds-link").symlink_to(tmp_path / "ds")  # a dataset folder, given by a link to it
    assert output_manifest("score", "s", {}, tmp_path / "ds-link", None)["input"]["path"] == \
        str((tmp_path / "ds").resolve())


def test_mismatch_names_every_field_that_differs():
    from rewardkit.runtime.output import _mismatch

    new = output_manifest("score", "s", {"n": 1}, "-", "abc")
    assert _mismatch(dict(new), new) == []
    old = {k: v for k, v in new.items() if k != "job"}  # a manifest from before the "job" field: score's
    assert _mismatch(old, new) == [] and _mismatch(old, dict(old)) == []
    assert _mismatch(old, {**new, "job": "generate"}) == ['job "score" (now "generate")']
    assert _mismatch({**new, "job": "generate"}, {k: v for k, v in new.items() if k != "job"}) == \
        ['job "generate" (now "score")']
    changed = {**new, "rewardkit_output": 2, "rewardkit_version": "0", "scorer": "t", "options": {"n": 2},
               "judge": "j", "format": "csv", "group_key": "g", "fields": {"a": "b"}, "with_texts": True,
               "input": {"path": "/old.jsonl", "sha256": "def"}}
    assert _mismatch(changed, new) == [
        "rewardkit_output 2 (now 1)", f'rewardkit_version "0" (now "{new["rewardkit_version"]}")',
        'scorer "t" (now "s")', 'options {"n": 2} (now {"n": 1})', 'judge "j" (now null)', 'format "csv" (now null)',
        'group_key "g" (now null)', 'fields {"a": "b"} (now null)', "with_texts true (now null)",
        "input /old.jsonl with other contents (now -)"]
    assert _mismatch({k: v for k, v in new.items() if k != "input"}, new) == ["input None with other contents (now -)"]


# ------------------------------------------------------------------------------------ claiming an output


def _manifest(n=1):
    return output_manifest("score", "scripted", {"n": n}, None, None)


def test_read_manifest_refuses_what_is_not_a_rewardkit_manifest(tmp_path):
    from rewardkit.runtime.output import _read_manifest

    out = tmp_path / "o.jsonl"
    assert _read_manifest(out) is None
    for text in (b"{not json", b"\xff\xfe", b"[1]", b'{"other": 1}', b'{"rewardkit_output": null}', b"[" * 100_000):
        manifest_path(out).write_bytes(text)
        with pytest.raises(JobError, match="not a rewardkit manifest"):
            _read_manifest(out)
    manifest_path(out).write_text('{"rewardkit_output": 1, "job": "score"}')
    assert _read_manifest(out) == {"rewardkit_output": 1, "job": "score"}


def test_check_output_decides_fresh_resume_or_restart(tmp_path):
    from rewardkit.runtime.output import check_output

    out = tmp_path / "o.jsonl"
    assert check_output(out, _manifest(), restart=False) is True  # nothing there: fresh
    manifest_path(out).write_text(json.dumps(_manifest()))
    assert check_output(out, _manifest(), restart=False) is False  # ours, nothing written yet: resume
    assert check_output(out, _manifest(2), restart=False) is True  # another job's, nothing written: start over
    out.write_bytes(b"")
    assert check_output(out, _manifest(2), restart=False) is True  # an empty OUT: nothing to lose
    out.write_bytes(b'{"id": "a"}\n')
    assert check_output(out, _manifest(), restart=False) is False
    assert check_output(out, _manifest(), restart=True) is True
    assert check_output(out, _manifest(2), restart=True) is True
    with pytest.raises(JobError, match=r"written by another job: options \{\"n\": 1\} \(now \{\"n\": 2\}\)"):
        check_output(out, _manifest(2), restart=False)


@pytest.mark.parametrize("side", [".rejects.jsonl", ".retry.jsonl"])
def test_check_output_refuses_side_files_without_a_manifest(tmp_path, side):
    from rewardkit.runtime.output import check_output

    out = tmp_path / "o.jsonl"
    (tmp_path / ("o.jsonl" + side)).write_text("{}\n")
    with pytest.raises(JobError, match="exists but o.jsonl has no rewardkit manifest"):
        check_output(out, _manifest(), restart=True)


def test_check_output_refuses_a_side_file_that_is_not_a_regular_file(tmp_path):
    import os

    from rewardkit.runtime.output import check_output, rejects_path

    out = tmp_path / "o.jsonl"
    manifest_path(out).write_text(json.dumps(_manifest()))
    os.mkfifo(rejects_path(out))
    with pytest.raises(JobError, match=r"is a named pipe \(FIFO\), not a regular file"):
        check_output(out, _manifest(), restart=True)


def test_check_not_input_refuses_the_input_its_folder_and_side_files_on_it(tmp_path):
    from rewardkit.runtime.output import check_not_input

    inp = tmp_path / "in.jsonl"
    inp.write_text("x")
    other = tmp_path / "other.jsonl"
    other.write_text("y")
    check_not_input(inp, other)  # another existing file: fine
    check_not_input(inp, tmp_path / "new.jsonl")  # nothing there yet: fine
    (tmp_path / "alias.jsonl").symlink_to(inp)
    for out in (inp, tmp_path / "alias.jsonl"):
        with pytest.raises(JobError, match="would write over or into the input"):
            check_not_input(inp, out)
    for side in ("manifest.json", "rejects.jsonl", "retry.jsonl", "lock"):  # the input named like a side file
        s = tmp_path / f"o.jsonl.{side}"
        s.write_text("x")
        with pytest.raises(JobError, match="would write over or into the input"):
            check_not_input(s, tmp_path / "o.jsonl")
    ds = tmp_path / "dataset"
    (ds / "sub").mkdir(parents=True)
    with pytest.raises(JobError, match="would write over or into the input"):
        check_not_input(ds, ds / "sub" / "o.jsonl")
    check_not_input(ds, tmp_path / "o.jsonl")  # beside the folder, not in it


def test_an_input_named_like_the_retry_journal_of_out_is_refused_not_deleted(tmp_path):
    """Before: scoring OUT.retry.jsonl into OUT (a rewardkit output) with --restart deleted the input."""
    from rewardkit.runtime.jobs import score_file

    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.append([{"id": "a"}])
    inp = retry_path(out)
    inp.write_text(json.dumps({"id": "b", "prompt": "p", "responses": ["r"]}) + "\n")
    before = _listing(tmp_path)
    with pytest.raises(JobError, match="would write over or into the input"):
        score_file(inp, _Scripted(), out, restart=True)
    assert _listing(tmp_path) == before


def test_same_file_is_false_unless_both_exist_and_are_one(tmp_path):
    from rewardkit.runtime.output import _same_file

    a = tmp_path / "a"
    a.write_text("x")
    (tmp_path / "b").write_text("x")
    (tmp_path / "c").symlink_to(a)
    assert _same_file(a, tmp_path / "c") and _same_file(a, a)
    assert not _same_file(a, tmp_path / "b")
    assert not _same_file(a, tmp_path / "missing") and not _same_file(tmp_path / "missing", a)
    assert not _same_file(tmp_path / "missing", tmp_path / "missing")
    too_long = tmp_path / ("x" * 300)  # stat fails with ENAMETOOLONG, not "no such file": not the same file
    assert not _same_file(too_long, a) and not _same_file(a, too_long)


@pytest.mark.parametrize("raw, folder", [("x/", True), ("x/.", True), ("x/..", True), (".", True), ("..", True),
                                         ("", True), ("a/./b", False), ("x", False), ("X", False), ("o.X", False),
                                         (".x", False), ("..x", False), ("x.", False), ("a/b/c", False)])
def test_names_a_folder_reads_the_path_as_written(raw, folder):
    from rewardkit.runtime.output import _names_a_folder

    assert _names_a_folder(raw) is folder


def test_names_a_folder_reads_both_separators_where_there_are_two(monkeypatch):
    """Windows: '\\' is the separator and '/' the other one; a path ending in either names a folder."""
    import types

    import rewardkit.runtime.output as output
    from rewardkit.runtime.output import _names_a_folder

    monkeypatch.setattr(output, "os", types.SimpleNamespace(sep="\\", altsep="/"))
    assert _names_a_folder("out\\") and _names_a_folder("out/") and _names_a_folder("a\\..")
    assert not _names_a_folder("a\\o.jsonl") and not _names_a_folder("a/o.jsonl")


def test_missing_folders_are_listed_topmost_first_below_a_real_folder(tmp_path):
    from rewardkit.runtime.output import _missing_folders

    assert _missing_folders(tmp_path) == []
    assert _missing_folders(tmp_path / "a" / "b" / "c") == [tmp_path / "a", tmp_path / "a" / "b",
                                                           tmp_path / "a" / "b" / "c"]
    assert not (tmp_path / "a").exists()
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(JobError, match="notes.txt: is a regular file, not a folder"):
        _missing_folders(tmp_path / "notes.txt" / "a")
    (tmp_path / "broken").symlink_to(tmp_path / "nowhere")
    with pytest.raises(JobError, match="broken: is a broken link, not a folder"):
        _missing_folders(tmp_path / "broken" / "a")


def test_claim_refuses_a_folder_creating_nothing(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(JobError, match="is a directory; --out must be a file"):
        JobOutput(tmp_path / "d", _manifest()).claim()
    (tmp_path / "dl").symlink_to(tmp_path / "d")  # a link to a folder: a link, not ours
    with pytest.raises(JobError, match="is a symbolic link, not a regular file"):
        JobOutput(tmp_path / "dl", _manifest()).claim()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "dl"] and not any((tmp_path / "d").iterdir())


def test_claim_refuses_writing_over_an_input_given_as_a_link_even_with_restart(tmp_path):
    """A generated rollouts file (ours, with a manifest) scored into itself through a link to it."""
    out = tmp_path / "rollouts.jsonl"
    with JobOutput(out, output_manifest("generate", None, {}, None, None)).claim().open() as o:
        o.append([{"id": "a"}])
    (tmp_path / "link.jsonl").symlink_to(out)
    before = _listing(tmp_path)
    for inp in (tmp_path / "link.jsonl", out):
        with pytest.raises(JobError, match="would write over or into the input"):
            JobOutput(out, _manifest(), restart=True, inp=inp).claim()
    assert _listing(tmp_path) == before


def test_claim_refuses_an_output_inside_the_input_folder(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "a.jsonl").write_text("x")
    with pytest.raises(JobError, match="would write over or into the input"):
        JobOutput(ds / "new" / "o.jsonl", _manifest(), inp=ds).claim()
    assert sorted(p.name for p in ds.iterdir()) == ["a.jsonl"]


# ------------------------------------------------------------------------------------ the lock


def _hold(path, record):
    """Another job's lock: the record written, the flock held on its own descriptor (closed to release)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    os.write(fd, record)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("record, pid", [(b"rewardkit lock, pid %10d\n" % 4242, "4242"), (b"777", "777")])
def test_a_held_lock_names_the_other_jobs_pid(tmp_path, record, pid):
    import os

    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    fd = _hold(lock_path(out), record)
    try:
        with pytest.raises(JobError, match=rf"another rewardkit job \(pid {pid}\) is writing it"):
            OutputLock.check(out)
        with pytest.raises(JobError, match=rf"another rewardkit job \(pid {pid}\) is writing it"):
            JobOutput(out, _manifest()).claim()
        with pytest.raises(JobError, match=rf"another rewardkit job \(pid {pid}\) is writing it"):
            with OutputLock(out):
                pass
        assert lock_path(out).read_bytes() == record  # neither read nor taken over
    finally:
        os.close(fd)
    with OutputLock(out):
        pass
    assert not lock_path(out).exists()


def test_the_lock_holds_our_pid_while_held_and_is_removed_after(tmp_path):
    import fcntl
    import os

    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    OutputLock.check(out)  # nothing there: nothing to refuse, nothing created
    assert not lock_path(out).exists()
    lock_path(out).write_bytes(b"123")  # an older release's record, its job killed: taken over
    lock = OutputLock(out)
    lock.__exit__(None, None, None)  # not entered: nothing to release
    with lock as held:
        assert held is lock
        assert lock_path(out).read_bytes() == b"rewardkit lock, pid %10d\n" % os.getpid()
        fd = os.open(lock_path(out), os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not lock_path(out).exists()
    lock.__exit__(None, None, None)  # a second exit is a no-op
    with OutputLock(out):  # a fresh lock file, created whole
        assert lock_path(out).read_bytes() == b"rewardkit lock, pid %10d\n" % os.getpid()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["o.jsonl.lock"]


def test_a_lock_file_replaced_during_the_job_is_not_removed_by_it(tmp_path):
    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    with OutputLock(out):
        lock_path(out).unlink()
        lock_path(out).write_bytes(b"rewardkit lock, pid %10d\n" % 1)  # a later job's
    assert lock_path(out).read_bytes() == b"rewardkit lock, pid %10d\n" % 1


@pytest.mark.parametrize("what, why", [("empty", "regular file, 0 bytes"), ("text", "regular file, 9 bytes"),
                                       ("junk after record", "regular file, 35 bytes"),
                                       ("64 digits and more", "regular file, 64 bytes"),  # the first 64 bytes read
                                       ("long record and more", "regular file, 64 bytes"),
                                       ("link to a lock", "symbolic link"), ("dangling link", "symbolic link"),
                                       ("fifo", "named pipe (FIFO), 0 bytes")])
def test_a_lock_path_that_is_not_a_rewardkit_lock_is_refused_and_left(tmp_path, what, why):
    import os

    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    lp = lock_path(out)
    real = tmp_path / "real.lock"
    real.write_bytes(b"rewardkit lock, pid %10d\n" % 1)
    if what == "empty":
        lp.write_bytes(b"")
    elif what == "text":
        lp.write_bytes(b"my notes\n")
    elif what == "junk after record":
        lp.write_bytes(b"rewardkit lock, pid %10d\nmore" % 1)
    elif what == "64 digits and more":  # before: read as an older release's lock, overwritten and removed
        lp.write_bytes(b"1234567890" * 7 + b"\nmy data\n")
    elif what == "long record and more":
        lp.write_bytes(b"rewardkit lock, pid" + b" " * 43 + b"1\nmy data\n")
    elif what == "link to a lock":
        lp.symlink_to(real)
    elif what == "dangling link":
        lp.symlink_to(tmp_path / "nowhere")
    else:
        os.mkfifo(lp)
    before = _listing(tmp_path) if what != "fifo" else None
    for attempt in (lambda: OutputLock.check(out), lambda: OutputLock(out).__enter__(),
                    lambda: JobOutput(out, _manifest()).claim()):
        with pytest.raises(JobError, match=f"^{re.escape(str(lp))}: exists and is not a rewardkit lock "
                                           f"{re.escape(f'({why})')}; left as it is"):
            attempt()
    if before is not None:
        assert _listing(tmp_path) == before
    assert os.path.lexists(lp) and real.read_bytes() == b"rewardkit lock, pid %10d\n" % 1


def test_a_held_lock_whose_record_cannot_be_read_is_still_another_jobs(tmp_path, monkeypatch):
    """The holder's record is read again for the message; one that no longer reads as a record names no pid."""
    import os

    import rewardkit.runtime.output as output
    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    fd = _hold(lock_path(out), b"rewritten meanwhile")
    monkeypatch.setattr(output, "_check_record", lambda path, fd: None)  # it read as a record when checked
    try:
        with pytest.raises(JobError, match=r"another rewardkit job \(pid \?\) is writing it"):
            OutputLock.check(out)
    finally:
        os.close(fd)


def test_a_lock_file_removed_between_open_and_flock_is_left_and_a_new_one_taken(tmp_path):
    """The holder ends (and removes its file) after this job opened it: the orphan is noticed, a fresh one made."""
    import os

    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    first, late = OutputLock(out), OutputLock(out)
    first.__enter__()
    real_open = late._open
    opened = []

    def open_then_holder_ends():
        fd = real_open()
        if not opened:
            first.__exit__(None, None, None)
        opened.append(os.fstat(fd).st_ino)
        return fd

    late._open = open_then_holder_ends
    with late:
        assert len(opened) == 2 and os.stat(lock_path(out)).st_ino == opened[1]
        assert lock_path(out).read_bytes() == b"rewardkit lock, pid %10d\n" % os.getpid()
    assert not lock_path(out).exists()


def test_a_lock_file_created_by_another_job_while_creating_ours_is_the_one_taken(tmp_path, monkeypatch):
    import os

    from rewardkit.runtime.output import OutputLock

    out = tmp_path / "o.jsonl"
    real_link = os.link

    def other_job_first(src, dst):
        with open(dst, "wb") as f:
            f.write(b"rewardkit lock, pid %10d\n" % 1)  # a job killed right after creating it
        real_link(src, dst)

    monkeypatch.setattr(os, "link", other_job_first)
    with OutputLock(out):
        assert lock_path(out).read_bytes() == b"rewardkit lock, pid %10d\n" % os.getpid()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["o.jsonl.lock"]  # our staging file removed


def test_a_lock_file_that_vanishes_each_time_it_is_made_is_refused(tmp_path, monkeypatch):
    import os

    from rewardkit.runtime.output import OutputLock

    made = []
    monkeypatch.setattr(os, "link", lambda src, dst: made.append(dst))  # made, and removed at once by someone
    with pytest.raises(JobError, match="is not a rewardkit lock \\(file that vanished\\)"):
        OutputLock(tmp_path / "o.jsonl").__enter__()
    assert made == [lock_path(tmp_path / "o.jsonl")] * 2 and list(tmp_path.iterdir()) == []


def test_a_lock_file_replaced_at_every_try_is_given_up_after_100_tries(tmp_path, monkeypatch):
    import rewardkit.runtime.output as output
    from rewardkit.runtime.output import OutputLock

    monkeypatch.setattr(output, "_names", lambda path, fd: False)  # removed and re-created after each open
    lock = OutputLock(tmp_path / "o.jsonl")
    real_open, opened = lock._open, []
    lock._open = lambda: opened.append(1) or real_open()
    with pytest.raises(JobError, match="removed and re-created 100 times"):
        lock.__enter__()
    assert len(opened) == 100 and lock.fd is None


def test_a_lock_that_cannot_be_created_reports_why(tmp_path, monkeypatch):
    """A read-only file system: the lock's staging file is never made, and the error says so."""
    import errno

    from rewardkit.runtime.output import OutputLock

    def read_only(self, data):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_bytes", read_only)
    with pytest.raises(OSError) as e:
        OutputLock(tmp_path / "o.jsonl").__enter__()
    assert e.value.errno == errno.EROFS and list(tmp_path.iterdir()) == []


def test_a_lock_in_a_missing_folder_is_an_os_error_not_a_foreign_lock(tmp_path):
    from rewardkit.runtime.output import OutputLock

    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        OutputLock.check(tmp_path / "file" / "o.jsonl")


# ------------------------------------------------------------------------------------ open, rows, merge


def test_open_writes_the_manifest_before_any_row_and_keeps_an_existing_folder(tmp_path):
    out = tmp_path / "o.jsonl"
    m = _manifest()
    made = []
    with JobOutput(out, m).claim().open(on_mkdir=made.append) as o:
        assert made == []  # no folder was made
        text = manifest_path(out).read_text()
        assert json.loads(text) == m and text.endswith("}\n")
        assert text.splitlines()[1] == ' "rewardkit_output": 1,'  # one space per level: small and readable
        o.append([{"id": "a"}])  # straight after open, without done(): into OUT
        o.append([{"id": "b"}])
        assert not retry_path(out).exists()
    assert out.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    with JobOutput(out, m).open() as o:  # open() alone, in an existing folder, resumes as well
        assert o.done() == {"a": {"id": "a"}, "b": {"id": "b"}}
    assert json.loads(manifest_path(out).read_text()) == m


def test_open_starts_over_on_restart_and_removes_stale_staging_files(tmp_path):
    from rewardkit.runtime.output import rejects_path

    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.append([{"id": "a"}])
        o.reject([{"path": "in", "line": 1, "field": "id"}])
        o.append([{"id": "a", "v": 2}], journal=True)
    stale = [tmp_path / ".o.jsonl.rewardkit-99999.tmp", tmp_path / ".o.jsonl.4242.tmp",
             tmp_path / ".o.jsonl.manifest.json.rewardkit-7.tmp"]
    for s in stale:
        s.write_text("half")
    keep = tmp_path / ".o.jsonl.notes.tmp"
    keep.write_text("mine")
    with JobOutput(out, _manifest(2), restart=True).claim().open() as o:
        assert not any(s.exists() for s in stale) and keep.read_text() == "mine"
        assert not out.exists() and not rejects_path(out).exists() and not retry_path(out).exists()
        assert json.loads(manifest_path(out).read_text()) == _manifest(2)
        assert o.done() == {}
    with JobOutput(out, _manifest(2)).claim().open() as o:  # resumed: stale files go, nothing else
        (tmp_path / ".o.jsonl.rewardkit-1.tmp").write_text("half")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".o.jsonl.notes.tmp", ".o.jsonl.rewardkit-1.tmp",
                                                         "o.jsonl.manifest.json"]


def test_open_of_a_resumed_job_keeps_its_rows_and_rejects(tmp_path):
    from rewardkit.runtime.output import rejects_path

    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.append([{"id": "a"}])
        o.reject([{"path": "in", "line": 1, "field": "id"}])
    before = _listing(tmp_path)
    with JobOutput(out, _manifest()).claim().open() as o:
        assert o.done() == {"a": {"id": "a"}}
        assert rejects_path(out).read_text() == '{"path": "in", "line": 1, "field": "id"}\n'
    assert _listing(tmp_path) == before


def test_folders_made_for_a_job_that_fails_before_writing_go_again(tmp_path, monkeypatch):
    """Disk full while writing the manifest: the error stands, the lock and the new folders are gone."""
    import errno
    import os

    import rewardkit.runtime.output as output

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(output, "write_atomic", full)
    out = tmp_path / "a" / "b" / "o.jsonl"
    job = JobOutput(out, _manifest()).claim()
    made = []
    with pytest.raises(OSError, match="No space left") as e:
        with job.open(on_mkdir=made.append):
            pass
    assert e.value.errno == errno.ENOSPC and made == [tmp_path / "a"]
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a" / "b").mkdir(parents=True)  # a folder made meanwhile by someone else: open() goes on
    (tmp_path / "a" / "b" / "theirs").write_text("x")  # ... and holds a file: kept, and so is its folder
    with pytest.raises(OSError, match="No space left"):
        with job.open():
            pass
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["a", "a/b", "a/b/theirs"]


def test_folders_made_before_a_failing_mkdir_or_on_mkdir_go_again(tmp_path, monkeypatch):
    out = tmp_path / "a" / "b" / "c" / "o.jsonl"
    job = JobOutput(out, _manifest()).claim()

    def refuse(folder):
        raise PermissionError(13, "Permission denied", str(folder))

    with pytest.raises(PermissionError):
        with job.open(on_mkdir=refuse):
            pass
    assert list(tmp_path.iterdir()) == []
    real = Path.mkdir

    def full_at_c(self, *a, **k):  # the disk fills after two of the three folders
        if self.name == "c":
            raise OSError(28, "No space left on device", str(self))
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", full_at_c)
    with pytest.raises(OSError, match="No space left"):
        with job.open():
            pass
    assert list(tmp_path.iterdir()) == []


def test_a_folder_made_between_claim_and_open_is_fine(tmp_path):
    out = tmp_path / "a" / "o.jsonl"
    job = JobOutput(out, _manifest()).claim()
    (tmp_path / "a").mkdir()
    made = []
    with job.open(on_mkdir=made.append) as o:
        o.append([{"id": "x"}])
    assert made == [tmp_path / "a"] and out.read_text() == '{"id": "x"}\n'


def test_done_reads_out_then_the_journal_the_last_row_of_each_id_winning(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.append([{"id": "a", "v": 1}, {"id": "b", "v": 1}, {"id": "c", "v": 1}])
        o.append([{"id": "b", "v": 2}], journal=True)
    retry_path(out).write_bytes(retry_path(out).read_bytes() + b'{"id": "c", "v"')  # a retry killed mid-line
    with JobOutput(out, _manifest()).claim().open() as o:
        done = o.done()
        assert done == {"a": {"id": "a", "v": 1}, "b": {"id": "b", "v": 2}, "c": {"id": "c", "v": 1}}
        done["a"] = None  # a copy: the job's own record of rows is not changed
        assert retry_path(out).read_bytes() == b'{"id": "b", "v": 2}\n'
        o.append([{"id": "c", "v": 3}])  # a killed retry's journal exists: the rows go on into it, not into OUT
        assert [json.loads(x)["v"] for x in out.read_text().splitlines()] == [1, 1, 1]
        rows = o.merge(["a", "b", "c"])
    assert rows == [{"id": "a", "v": 1}, {"id": "b", "v": 2}, {"id": "c", "v": 3}]
    assert [json.loads(x) for x in out.read_text().splitlines()] == rows and not retry_path(out).exists()


def test_a_retry_journal_is_kept_for_the_rest_of_the_run_once_written(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.done()
        o.append([{"id": "a", "v": 1}])
        o.append([], journal=True)  # an empty retry writes no journal: later rows still go into OUT
        o.append([{"id": "b", "v": 1}])
        assert not retry_path(out).exists()
        o.append([{"id": "a", "v": 2}], journal=True)
        o.append([{"id": "c", "v": 1}])  # after a journal row: into the journal too
        assert out.read_text() == '{"id": "a", "v": 1}\n{"id": "b", "v": 1}\n'
        assert retry_path(out).read_text() == '{"id": "a", "v": 2}\n{"id": "c", "v": 1}\n'
        assert o.merge(["a", "b", "c"]) == [{"id": "a", "v": 2}, {"id": "b", "v": 1}, {"id": "c", "v": 1}]


def test_merge_orders_rows_by_the_inputs_ids_then_the_rest(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.done()
        o.append([{"id": "x"}, {"id": "b"}, {"id": "a"}])
        # "z" has no row yet (left for a later run), "x" is only in OUT (an input changed? kept, after the rest)
        assert o.merge(["a", "z", "b"]) == [{"id": "a"}, {"id": "b"}, {"id": "x"}]
    assert out.read_text() == '{"id": "a"}\n{"id": "b"}\n{"id": "x"}\n'


def test_merge_in_order_without_a_journal_leaves_the_file_as_it_is(tmp_path):
    import os

    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.done()
        o.append([{"id": "a"}, {"id": "b"}])
        before = os.stat(out)
        assert o.merge(["a", "b"]) == [{"id": "a"}, {"id": "b"}]
        assert (os.stat(out).st_ino, os.stat(out).st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_merge_of_a_journal_in_the_same_order_still_takes_its_rows(tmp_path):
    out = tmp_path / "o.jsonl"
    with JobOutput(out, _manifest()).claim().open() as o:
        o.done()
        o.append([{"id": "a", "ok": False}, {"id": "b", "ok": True}])
        o.append([{"id": "a", "ok": True}], journal=True)
        assert o.merge(["a", "b"]) == [{"id": "a", "ok": True}, {"id": "b", "ok": True}]
    assert out.read_text() == '{"id": "a", "ok": true}\n{"id": "b", "ok": true}\n'


def test_reject_writes_each_bad_record_once_across_runs(tmp_path):
    from rewardkit.runtime.output import rejects_path

    out = tmp_path / "o.jsonl"
    bad = [{"path": "in.jsonl", "line": 3, "field": "id", "error": "missing"},
           {"path": "in.jsonl", "line": 4, "field": "id", "error": "missing"},
           {"path": "in.jsonl", "line": 3, "field": "prompt", "error": "not text"},
           {"path": "other.jsonl", "line": 3, "field": "id", "error": "missing"}]
    with JobOutput(out, _manifest()).claim().open() as o:
        o.reject(bad[:1])
        o.reject(iter(bad))  # the first again (a resumed job reads the same input): not written twice
        o.reject([bad[1] | {"error": "again"}, {"path": "in.jsonl", "line": 5}, {"path": "in.jsonl", "line": 5}])
    # and twice in one batch: once
    assert [json.loads(x) for x in rejects_path(out).read_text().splitlines()] == bad + [{"path": "in.jsonl", "line": 5}]

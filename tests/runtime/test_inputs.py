import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rewardkit.runtime.inputs import BadRecord, InputError, read_groups
from rewardkit.runtime.jobs import load_groups


def write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    return p


GOOD = json.dumps({"id": "a", "problem": "1+1", "answer": "2", "responses": ["2", "3"], "correct": [True, False]})


def test_reads_shared_rollouts_as_is(rollouts_path):
    groups = [g for g in read_groups(rollouts_path)]
    assert len(groups) == 100 and sum(len(g) for g in groups) == 800
    g = groups[0]
    assert g.id == "math_cot_100-000" and g.reference == "420" and g.expert.startswith("Notice")
    assert g.labels == [True] * 8 and g.metadata["level"] == 3 and "preds" in g.metadata


@pytest.mark.parametrize(
    "line, field, msg",
    [
        ('{"problem": "p", "responses": [', None, "malformed JSON"),
        ('{"problem": "p"}', "responses", "missing"),
        ('{"problem": "p", "responses": []}', "responses", "empty response list"),
        ('{"problem": "p", "responses": ["a", 3]}', "responses[1]", "expected a string"),
        ('{"responses": ["a"]}', "prompt", "missing"),
        ('{"problem": "p", "responses": ["a"], "correct": [true, false]}', "correct", "2 labels for 1 responses"),
        ('[1, 2]', None, "expected a JSON object"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path, line, field, msg):
    p = write(tmp_path, "in.jsonl", [GOOD, line])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert e.value.line == 2 and e.value.field == field and msg in str(e.value)
    assert str(e.value).startswith(f"{p}:2:")


def test_non_utf8_byte_is_reported(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, b'{"problem": "caf\xe9", "responses": ["x"]}'])
    with pytest.raises(InputError, match=r"in.jsonl:2: not valid UTF-8"):
        list(read_groups(p))


def test_skip_bad_keeps_going(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, "{oops", b"\xff\xfe", json.dumps({"id": "b", "prompt": "q", "responses": ["r"]})])
    items = list(read_groups(p, skip_bad=True))
    assert [type(i).__name__ for i in items] == ["Group", "BadRecord", "BadRecord", "Group"]
    assert [i.line for i in items if isinstance(i, BadRecord)] == [2, 3]


def test_flat_jsonl_groups_by_key(tmp_path):
    rows = [{"group_id": "q1", "prompt": "P1", "answer": "1", "response": "r1", "correct": True},
            {"group_id": "q2", "prompt": "P2", "response": "s1"},
            {"group_id": "q1", "prompt": "P1", "answer": "1", "response": "r2", "correct": False}]
    p = write(tmp_path, "flat.jsonl", [json.dumps(r) for r in rows])
    g1, g2 = read_groups(p)
    assert (g1.id, g1.responses, g1.labels, g1.reference) == ("q1", ["r1", "r2"], [True, False], "1")
    assert (g2.id, g2.responses, g2.labels) == ("q2", ["s1"], None)


def test_parquet_and_saved_dataset(tmp_path, rollouts_path):
    import datasets

    rows = [json.loads(x) for x in rollouts_path.open()][:5]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(str(tmp_path / "r.parquet"))
    ds.save_to_disk(str(tmp_path / "ds"))
    for src in (tmp_path / "r.parquet", tmp_path / "ds"):
        groups = list(read_groups(src))
        assert [g.id for g in groups] == [r["id"] for r in rows]
        assert groups[3].responses == rows[3]["responses"] and groups[3].labels == rows[3]["correct"]


def test_duplicate_ids_are_an_error(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, GOOD])
    with pytest.raises(InputError, match="duplicate group id 'a'"):
        load_groups(p)
    with pytest.raises(InputError, match=r"in.jsonl:2: field 'id': duplicate group id 'a' \(first at line 1\)"):
        list(read_groups(p))  # every reader of groups, not only the job's
    groups, bad = load_groups(p, skip_bad=True)
    assert [g.id for g in groups] == ["a"]
    assert [(b.line, b.field, b.message) for b in bad] == [(2, "id", "duplicate group id 'a' (first at line 1)")]


# ------------------------------------------------------------------ malformed inputs: one line, exit 2

G = {"id": "g", "problem": "1+1", "answer": "2", "responses": ["\\boxed{2}"]}


def jl(*rows):
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows).encode()


def parquet_bytes(tmp_path):
    import datasets

    datasets.Dataset.from_list([G, dict(G, id="h")]).to_parquet(str(tmp_path / "ok.parquet"))
    return (tmp_path / "ok.parquet").read_bytes()


# (file name, content (bytes, or a function of tmp_path), extra CLI args, expected fragment of the one line)
MALFORMED = [
    ("deep.jsonl", jl(G, '{"problem": ' + "[" * 100_000), [], "deep.jsonl:2: JSON nested too deeply"),
    ("digits.jsonl", jl('{"problem": "p", "answer": ' + "9" * 5000 + ', "responses": ["a"]}'), [],
     "digits.jsonl:1: unreadable JSON value (Exceeds the limit (4300 digits)"),
    ("inf.jsonl", jl('{"problem": "p", "answer": 1e999, "responses": ["a"]}'), [],
     "inf.jsonl:1: field 'answer': expected a string or a finite number, got inf"),
    ("nan.jsonl", jl('{"problem": "p", "answer": NaN, "responses": ["a"]}'), [],
     "nan.jsonl:1: field 'answer': expected a string or a finite number, got nan"),
    ("true.jsonl", jl(dict(G, answer=True)), [], "true.jsonl:1: field 'answer': expected a string or a number "
     "(or a list of them), got boolean: 'answer' is read as the reference answer; correctness goes in 'correct'"),
    ("list.jsonl", jl(dict(G, answer=["2", {"x": 1}])), [],
     "list.jsonl:1: field 'answer[1]': expected a string, a number or a list of them, got a dict"),
    ("verl.jsonl", jl({"prompt": "p", "responses": ["a"], "reward_model": {"ground_truth": {"x": 1}}}), [],
     "verl.jsonl:1: field 'reward_model.ground_truth': expected a string, a number or a list of them, got a dict"),
    ("id.jsonl", jl(dict(G, id=True)), [], "id.jsonl:1: field 'id': expected a string or an integer, got boolean"),
    ("idobj.jsonl", jl(dict(G, id={"a": 1})), [], "idobj.jsonl:1: field 'id': expected a string or an integer, got dict"),
    ("resp.jsonl", jl(dict(G, responses="\\boxed{2}")), [], "resp.jsonl:1: field 'responses': expected a list, got str"),
    ("respnum.jsonl", jl(dict(G, responses=[2])), [], "field 'responses[0]': expected a string or a list of chat messages, got int"),
    ("prompt.jsonl", jl(dict(G, problem=5)), [], "prompt.jsonl:1: field 'problem': expected a string or a list of chat messages, got int"),
    ("role.jsonl", jl(dict(G, problem=[{"content": "hi"}])), [], "role.jsonl:1: field 'problem[0].role': expected a string, got null"),
    ("content.jsonl", jl(dict(G, problem=[{"role": "user", "content": 3}])), [],
     "content.jsonl:1: field 'problem[0].content': expected a string, got int"),
    ("labels.jsonl", jl(dict(G, correct="yes")), [], "labels.jsonl:1: field 'correct': expected a list of booleans"),
    ("nested.jsonl", jl(G, dict(G, id="h", responses=[[1, 2]])), [], "nested.jsonl:2: field 'responses[0]'"),
    ("trunc.jsonl", jl(G)[:-1] + b"\n" + jl(dict(G, id="h"))[:40], [], "trunc.jsonl:2: malformed JSON"),
    ("latin1.jsonl", jl(G) + b'{"problem": "caf\xe9", "responses": ["x"]}\n', [], "latin1.jsonl:2: not valid UTF-8"),
    ("array.jsonl", jl("[1, 2]"), [], "array.jsonl:1: expected a JSON object, got list"),
    ("scalar.jsonl", jl("42"), [], "scalar.jsonl:1: expected a JSON object, got int"),
    ("empty.jsonl", b"", [], "empty.jsonl: no groups to score: it holds no records"),
    ("blank.jsonl", b"\n\n  \n", [], "blank.jsonl: no groups to score"),
    ("dup.jsonl", jl(G, dict(G, id="h"), G), [], "dup.jsonl:3: field 'id': duplicate group id 'g' (first at line 1)"),
    ("null.jsonl", jl("null"), [], "null.jsonl:1: expected a JSON object, got null"),
    ("unterminated.jsonl", b'{"problem": "abc', [], "malformed JSON (Unterminated string starting at column 13)"),
    ("control.jsonl", b'{"problem": "a\tb"}\n', [], "malformed JSON (Invalid control character at column 15)"),
    ("verlstr.jsonl", jl({"prompt": "p", "responses": ["a"], "reward_model": "72"}), [],
     "verlstr.jsonl:1: field 'reward_model': expected an object with 'ground_truth' (verl's shape), got str"),
    ("device", "/dev/zero", [], "/dev/zero: is a character device, not a file of rows"),
    ("flat.jsonl", jl({"group_id": "q", "prompt": "p", "answer": "1", "response": "a", "correct": True},
                      {"group_id": "q", "prompt": "p", "answer": "1", "response": "b"}), [],
     "flat.jsonl:1: field 'correct': labels given for only some responses"),
    ("flatkey.jsonl", jl({"prompt": "p", "response": "a"}), ["--group-key", "qid"], "flatkey.jsonl:1: field 'qid': missing group key"),
    ("fmt.jsonl", jl(G), ["--format", "csv"], "fmt.jsonl: unknown format 'csv'"),
    ("rows.csv", b"problem,answer,response\n1+1,2,2\n", [],
     "rows.csv: CSV is not an input format rewardkit reads; it reads JSONL (.jsonl: grouped, or one response per "
     "line), Parquet (.parquet, either shape) or a saved Hugging Face dataset folder"),
    ("csvbody.jsonl", b"problem,answer,response\n1+1,2,2\n", [], "csvbody.jsonl:1: malformed JSON (Expecting value "
     "at column 1); this looks like CSV, which rewardkit does not read: it reads JSONL"),
    ("doc.json", b'[{"problem": "1+1", "responses": ["2"]}]', [], "doc.json: a JSON document is not an input format"),
    ("corrupt.parquet", b"PAR1" + b"\x00garbage" * 50 + b"PAR1", [], "corrupt.parquet: not a readable Parquet file"),
    ("rows.jsonl.gz", lambda t: __import__("gzip").compress(jl(G)), [],
     "rows.jsonl.gz: gzip-compressed, which rewardkit does not read; decompress it (zcat "),
    ("rows.jsonl.zst", b"\x28\xb5\x2f\xfd" + b"\x00" * 20, [], "rows.jsonl.zst: zstd-compressed, which rewardkit"),
    ("cut.parquet", lambda t: parquet_bytes(t)[:300], [], "cut.parquet: not a readable Parquet file"),
    ("missing.jsonl", None, [], "missing.jsonl: no such file or directory"),
    ("notads", "dir", [], "notads: not a saved Hugging Face dataset folder"),
    ("batch.jsonl", jl(G), ["--batch-size", "0"], "--batch-size must be a positive integer, got 0"),
    ("batchneg.jsonl", jl(G), ["--batch-size", "-1"], "--batch-size must be a positive integer, got -1"),
    ("limit.jsonl", jl(G), ["--limit", "0"], "--limit must be a positive integer, got 0"),
    ("batchabc.jsonl", jl(G), ["--batch-size", "abc"], "--batch-size must be a positive integer, got abc"),
    ("limitabc.jsonl", jl(G), ["--limit", "1.5"], "--limit must be a positive integer, got 1.5"),
    ("opt.jsonl", jl(G), ["-o", "nokey"], "invalid value for --option: expected KEY=VALUE, got 'nokey'"),
    ("optname.jsonl", jl(G), ["-o", "colour=red"], "has no option(s) ['colour']"),
    ("scorer.jsonl", jl(G), ["--scorer", "nope"], "unknown scorer 'nope'"),
    ("judge.jsonl", jl(G), ["--judge", "smollm2"], "scorer 'verifier' takes no judge"),
    ("outdir.jsonl", jl(G), ["--out", "{tmp}"], "is a directory; --out must be a file"),
    ("outfile.jsonl", jl(G), ["--out", "{tmp}/outfile.jsonl/x.jsonl"], "outfile.jsonl: is a regular file, not a folder"),
    ("outin.jsonl", jl(G), ["--out", "{tmp}/outin.jsonl"], "--out would write over or into the input"),
    ("foreign.jsonl", jl(G), ["--out", "{tmp}/notes.txt"], "notes.txt: exists and is not a rewardkit output"),
]


@pytest.mark.parametrize("name, content, args, fragment", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_is_one_line_file_line_field_error(tmp_path, name, content, args, fragment):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    p = tmp_path / name
    if isinstance(content, str) and content.startswith("/dev/"):
        p = Path(content)
    elif content == "dir":
        p.mkdir()
        (p / "data.txt").write_text("not a dataset")
    elif callable(content):
        p.write_bytes(content(tmp_path))
    elif content is not None:
        p.write_bytes(content)
    (tmp_path / "notes.txt").write_bytes(b"keep me\nno newline")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = [] if "--out" in args else ["--out", str(tmp_path / "o" / "out.jsonl")]
    r = CliRunner().invoke(app, ["score", str(p), *out, *args])
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert r.stdout == "" and r.stderr.count("\n") == 1, r.stderr  # one line, never wrapped
    assert r.stderr.startswith("error: ") and fragment in r.stderr, r.stderr
    assert " at at " not in r.stderr and "NoneType" not in r.stderr
    assert (tmp_path / "notes.txt").read_bytes() == b"keep me\nno newline"


def test_input_hint_names_skip_bad_on_the_same_line(tmp_path):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    p = write(tmp_path, "in.jsonl", [GOOD, '{"problem": "p"}'])
    r = CliRunner().invoke(app, ["score", str(p), "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    assert "in.jsonl:2: field 'responses': missing" in r.stderr and "--skip-bad" in r.stderr


# ------------------------------------------------------------------ input people already have

CHAT = [{"role": "system", "content": "Reason step by step."},
        {"role": "user", "content": "What is 2+3?"},
        {"role": "assistant", "content": "Let me think."},
        {"role": "user", "content": [{"type": "text", "text": "Put the answer in "}, {"type": "text", "text": "\\boxed{}."}]}]


def test_chat_prompt_judge_sees_last_user_turn_and_messages_are_kept(tmp_path):
    p = write(tmp_path, "chat.jsonl", [json.dumps({"id": "c", "prompt": CHAT, "answer": "5",
                                                   "responses": ["\\boxed{5}", "\\boxed{6}"]})])
    (g,) = read_groups(p)
    assert g.prompt == "Put the answer in \\boxed{}." and g.metadata["messages"] == CHAT
    assert g.reference == "5" and g.responses == ["\\boxed{5}", "\\boxed{6}"]


def test_verl_rows_read_without_conversion(tmp_path):
    # a verl RL dataset row (examples/data_preprocess/gsm8k.py) with the rollouts of its prompt in
    # `responses`: the shape `verl.trainer.main_generation` writes (data.n_samples responses per row)
    row = {"data_source": "openai/gsm8k",
           "prompt": [{"role": "user", "content": "Natalia sold clips to 48 of her friends in April, and then she "
                       "sold half as many clips in May. How many clips did Natalia sell altogether in April and May? "
                       "Let's think step by step and output the final answer after \"####\"."}],
           "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"},
           "extra_info": {"split": "train", "index": 0, "answer": "Natalia sold 48/2 = 24 clips in May. #### 72",
                          "question": "Natalia sold clips to 48 of her friends in April..."},
           "uid": "0b3c", "responses": ["48 + 24 = \\boxed{72}", "48 + 48 = \\boxed{96}"]}
    import datasets

    p = write(tmp_path, "verl.jsonl", [json.dumps(row)])
    datasets.Dataset.from_list([row]).to_parquet(str(tmp_path / "verl.parquet"))
    (pq,) = read_groups(tmp_path / "verl.parquet")
    (g,) = read_groups(p)
    assert (pq.prompt, pq.reference, pq.responses) == (g.prompt, g.reference, g.responses)
    assert g.id == "verl-1" and g.reference == "72" and g.prompt.startswith("Natalia sold clips")
    assert g.metadata["data_source"] == "openai/gsm8k" and g.metadata["extra_info"]["index"] == 0
    assert g.metadata["messages"] == row["prompt"]
    from rewardkit.scoring import get_scorer

    (s,) = get_scorer("verifier").score([g])
    assert s.rewards.tolist() == [1.0, 0.0]


def test_verl_parquet_with_flat_responses_grouped_by_uid(tmp_path):
    import datasets

    base = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 6*7?"}],
            "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"index": 3}}
    rows = [dict(base, uid="u1", response=r) for r in ("\\boxed{42}", "\\boxed{41}", "\\boxed{42}")]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "v.parquet"))
    (g,) = read_groups(tmp_path / "v.parquet")
    assert (g.id, g.reference, g.prompt, len(g)) == ("u1", "42", "What is 6*7?", 3)


@pytest.mark.parametrize("conversational", [False, True])
def test_trl_prompt_completion_rows_grouped_by_prompt(tmp_path, conversational):
    # TRL prompt-completion rows (one completion per line, no group id), conversational or standard
    def prompt(q):
        return [{"role": "user", "content": q}] if conversational else q

    def completion(c):
        return [{"role": "assistant", "content": c}] if conversational else c

    rows = [{"prompt": prompt("What color is the sky?"), "completion": completion("It is \\boxed{blue}."), "ground_truth": "blue"},
            {"prompt": prompt("2+2?"), "completion": completion("\\boxed{4}"), "ground_truth": "4"},
            {"prompt": prompt("What color is the sky?"), "completion": completion("\\boxed{green}"), "ground_truth": "blue"}]
    p = write(tmp_path, "trl.jsonl", [json.dumps(r) for r in rows])
    g1, g2 = read_groups(p)
    assert (g1.prompt, g1.responses) == ("What color is the sky?", ["It is \\boxed{blue}.", "\\boxed{green}"])
    assert (g2.reference, g2.responses) == ("4", ["\\boxed{4}"])
    assert ("messages" in g1.metadata) == conversational
    # ids come from the prompt, not from line numbers: the same rows in another order (another file) keep them
    rev = write(tmp_path, "rev.jsonl", [json.dumps(r) for r in rows[::-1]])
    assert {g.prompt: g.id for g in read_groups(rev)} == {g1.prompt: g1.id, g2.prompt: g2.id} and g1.id != g2.id


def test_trl_grouped_completions(tmp_path):
    row = {"prompt": [{"role": "user", "content": "2+2?"}],
           "completions": [[{"role": "assistant", "content": "\\boxed{4}"}], [{"role": "assistant", "content": "5"}]],
           "ground_truth": 4}
    (g,) = read_groups(write(tmp_path, "trl.jsonl", [json.dumps(row)]))
    assert g.responses == ["\\boxed{4}", "5"] and g.reference == "4"


def test_numeric_references_are_read_exactly(tmp_path):
    rows = [dict(json.loads(GOOD), id=str(i), answer=a) for i, a in enumerate([7, -3, 2.5, 1e3, 10**30])]
    got = [g.reference for g in read_groups(write(tmp_path, "n.jsonl", [json.dumps(r) for r in rows]))]
    assert got == ["7", "-3", "2.5", "1000", str(10**30)]


# ------------------------------------------------------------------ byte-order marks and pipes


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    plain = write(tmp_path, "plain.jsonl", [GOOD])
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())  # what Notepad and Excel's "UTF-8" write
    ((g,), (h,)) = list(read_groups(plain)), list(read_groups(bom))
    assert (g.id, g.prompt, g.responses, g.reference) == (h.id, h.prompt, h.responses, h.reference)


SHELL_CLI = "import conftest; from rewardkit.cli.app import main; main()"


def _score_via_shell(tmp_path, input_expr, out):
    """`rewardkit score INPUT` run by bash, so ``<(cat f)`` is a real process substitution (a pipe)."""
    root = Path(__file__).resolve().parents[2]
    cmd = f'{sys.executable} -c "{SHELL_CLI}" score {input_expr} --out {out}'
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300, cwd=root)


def test_process_substitution_input_is_read_once_and_scored(tmp_path):
    rows = [json.dumps(dict(json.loads(GOOD), id=i)) for i in "abc"]
    src = write(tmp_path, "in.jsonl", rows)
    out, ref = tmp_path / "out.jsonl", tmp_path / "ref.jsonl"
    r = _score_via_shell(tmp_path, f"<(cat {src})", out)
    assert r.returncode == 0, r.stderr  # before: the hash consumed the pipe, "no groups to score"
    assert _score_via_shell(tmp_path, str(src), ref).returncode == 0
    strip = lambda f: [{k: v for k, v in json.loads(x).items() if k != "cost"} for x in f.read_text().splitlines()]  # noqa: E731
    assert strip(out) == strip(ref) and len(strip(out)) == 3
    m = json.loads((tmp_path / "out.jsonl.manifest.json").read_text())
    import hashlib

    assert m["input"]["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    r = _score_via_shell(tmp_path, f"<(cat {src})", out)  # the same rows through a new pipe: resumed
    assert r.returncode == 0 and "resuming: 3 of 3" in r.stderr, r.stderr


def test_fifo_without_a_writer_is_an_error_not_a_hang(tmp_path):
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out.jsonl"
    r = _score_via_shell(tmp_path, str(fifo), out)  # before: blocked in open() until the 300 s timeout
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "no groups to score: it holds no records (a pipe: was its writer open?)" in r.stderr
    assert not out.exists()


def verl_dump(tmp_path: Path, step: int, rows: list[tuple[str, str, object, float]]) -> Path:
    """A file as verl 0.9.1's ``RayPPOTrainer._write_generations`` writes it (``rollout_data_dir/STEP.jsonl``):
    one JSON object per response with input/output/gts/score/step plus the reward extras of equal length
    (tests/integrations/test_verl.py writes one with verl's own method)."""
    p = tmp_path / f"{step}.jsonl"
    with open(p, "w") as f:
        for i, (inp, out, gt, score) in enumerate(rows):
            entry = {"input": inp, "output": out, "gts": gt, "score": score, "step": step, "acc": score,
                     "request_id": f"r{i}"}
            f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    return p


def test_verl_generation_dumps_are_grouped_by_input_within_a_step(tmp_path):
    # verl balances the batch across ranks, so one prompt's responses need not be adjacent
    rows = [("user\nWhat is 2+2?\nassistant\n", r"\boxed{4}", "4", 1.0),
            ("user\nWhat is 3+3?\nassistant\n", r"\boxed{7}", "6", 0.0),
            ("user\nWhat is 2+2?\nassistant\n", r"\boxed{5}", "4", 0.0),
            ("user\nWhat is 3+3?\nassistant\n", r"\boxed{6}", "6", 1.0)]
    p = verl_dump(tmp_path, 3, rows)
    g1, g2 = read_groups(p)
    assert (g1.prompt, g1.responses, g1.reference) == (rows[0][0], [r"\boxed{4}", r"\boxed{5}"], "4")
    assert (g2.responses, g2.reference) == ([r"\boxed{7}", r"\boxed{6}"], "6")
    # ids name the step and the prompt (not the line): the prompt keeps its id in the next step's dump
    assert g1.id.startswith("step3-") and g2.id.startswith("step3-") and g1.id != g2.id
    (h1, _) = read_groups(verl_dump(tmp_path / "..", 4, rows[2:]))
    assert h1.id == g1.id.replace("step3-", "step4-")
    assert g1.metadata == {"step": 3, "source": "verl generation dump"}  # no one response's logged score
    # the same prompt at two steps is two groups (dumps of several steps concatenated)
    both = tmp_path / "all.jsonl"
    both.write_text(p.read_text() + verl_dump(tmp_path, 4, rows[:2]).read_text())
    assert [len(g) for g in read_groups(both)] == [2, 2, 1, 1]


def test_verl_generation_dump_is_rescored_by_the_cli(tmp_path):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    p = verl_dump(tmp_path, 1, [("q: 2+2?", r"\boxed{4}", "4", 0.0), ("q: 2+2?", r"\boxed{5}", "4", 0.0),
                                ("q: 9-1?", r"\boxed{8}", 8, 0.0), ("q: no gts", r"\boxed{1}", None, 0.0)])
    out = tmp_path / "o.jsonl"
    r = CliRunner().invoke(app, ["score", str(p), "--scorer", "verifier", "--out", str(out), "--with-texts"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert {row["step"] for row in rows} == {1}  # the dump's step, in every row
    got = {row["prompt"]: (row["rewards"], row["statuses"]) for row in rows}  # --with-texts: the prompt too
    assert got["q: 2+2?"] == ([1.0, 0.0], ["ok", "ok"]) and got["q: 9-1?"] == ([1.0], ["ok"])
    assert got["q: no gts"][1] != ["ok"]  # no ground truth logged: never a silent 0
    assert rows[0]["responses"] == [r"\boxed{4}", r"\boxed{5}"] and rows[0]["reference"] == "4"
    # without --with-texts rows carry no texts; ids (from the step and prompt) are the same
    plain = tmp_path / "plain.jsonl"
    assert CliRunner().invoke(app, ["score", str(p), "--out", str(plain)]).exit_code == 0
    bare = [json.loads(x) for x in plain.read_text().splitlines()]
    assert [b["id"] for b in bare] == [x["id"] for x in rows] and "prompt" not in bare[0]


# ------------------------------------------------------------------ one meaning per field


def _score_cli(tmp_path, rows, *args):
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    p = write(tmp_path, "in.jsonl", [json.dumps(r) for r in rows])
    out = tmp_path / "out.jsonl"
    r = CliRunner().invoke(app, ["score", str(p), "--out", str(out), "--restart", *args])
    return r, [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []


def test_label_is_the_reference_in_flat_rows_as_in_openrlhf(tmp_path):
    # before: "field 'correct': expected a boolean" about a field the file does not have
    rows = [{"prompt": "2+2?", "response": r"\boxed{4}", "label": "4"},
            {"prompt": "2+2?", "response": r"\boxed{5}", "label": "4"}]
    r, out = _score_cli(tmp_path, rows)
    assert r.exit_code == 0, r.output
    assert [o["rewards"] for o in out] == [[1.0, 0.0]]


def test_common_field_names_are_read(tmp_path):
    rows = [{"question": "2+2?", "generation": r"\boxed{4}", "gold": 4},
            {"question": "2+2?", "generation": r"\boxed{3}", "gold": 4}]
    (g,) = read_groups(write(tmp_path, "g.jsonl", [json.dumps(r) for r in rows]))
    assert (g.prompt, g.responses, g.reference) == ("2+2?", [r"\boxed{4}", r"\boxed{3}"], "4")
    (h,) = read_groups(write(tmp_path, "h.jsonl", [json.dumps({"query": "q", "generations": ["a", "b"], "label": "x"})]))
    assert (h.responses, h.reference) == (["a", "b"], "x")


def test_a_field_mapping_reads_the_users_columns_and_errors_name_them(tmp_path):
    rows = [{"q": "2+2?", "out": r"\boxed{4}", "my_answer": "4", "answer": "5"},
            {"q": "2+2?", "out": r"\boxed{5}", "my_answer": "4", "answer": "5"}]
    r, out = _score_cli(tmp_path, rows, "--field", "prompt=q", "--field", "response=out",
                        "--field", "reference=my_answer")
    assert r.exit_code == 0, r.output
    assert [o["rewards"] for o in out] == [[1.0, 0.0]]  # my_answer, not the default 'answer' column
    groups = list(read_groups(write(tmp_path, "m.jsonl", [json.dumps(x) for x in rows]),
                          fields={"prompt": "q", "response": "out", "reference": "my_answer"}))
    assert groups[0].reference == "4" and groups[0].metadata["answer"] == "5"
    bad = [{"q": "2+2?", "out": "x", "my_answer": True}]
    r, _ = _score_cli(tmp_path, bad, "--field", "prompt=q", "--field", "response=out", "--field", "reference=my_answer")
    assert r.exit_code == 2 and "field 'my_answer'" in r.stderr and "correct" in r.stderr, r.stderr
    r, _ = _score_cli(tmp_path, bad, "--field", "prompt=question", "--field", "response=out")
    assert r.exit_code == 2 and "field 'question': missing" in r.stderr, r.stderr
    r, _ = _score_cli(tmp_path, bad, "--field", "answer=q")
    assert r.exit_code == 2 and "unknown field 'answer'" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_correctness_under_label_is_refused_naming_the_field(tmp_path):
    rows = [{"prompt": "p", "response": "a", "label": True}]
    with pytest.raises(InputError, match=r"field 'label': .*got boolean: 'label' is read as the reference answer; "
                                         r"correctness goes in 'correct'"):
        list(read_groups(write(tmp_path, "l.jsonl", [json.dumps(r) for r in rows])))
    (g,) = read_groups(write(tmp_path, "c.jsonl", [json.dumps({"prompt": "p", "response": "a", "is_correct": 1})]))
    assert g.labels == [True]


def test_a_list_reference_means_any_of_them_is_right(tmp_path):
    # verl's datasets store several acceptable answers in reward_model.ground_truth; before: refused
    rows = [{"prompt": [{"role": "user", "content": "Half of 1?"}], "responses": [r"\boxed{0.5}", r"\boxed{1/2}", r"\boxed{2}"],
             "reward_model": {"style": "rule", "ground_truth": ["1/2", "0.5"]}},
            {"prompt": "Name 2", "response": r"\boxed{two}", "answer": ["2", "two"]}]
    r, out = _score_cli(tmp_path, rows[:1])
    assert r.exit_code == 0, r.output
    assert out[0]["rewards"] == [1.0, 1.0, 0.0]
    (g,) = read_groups(write(tmp_path, "f.jsonl", [json.dumps(rows[1])]))
    assert g.reference == ("2", "two") and g.references == ("2", "two")


def test_rescoring_logs_without_a_reference_says_why_in_one_line(tmp_path):
    # TRL's completion logs hold prompt, completion and rewards, no reference: every response abstains
    rows = [{"step": 1, "prompt": "2+2?", "completion": c, "reward": 1.0} for c in (r"\boxed{4}", r"\boxed{5}")]
    r, out = _score_cli(tmp_path, rows)
    assert r.exit_code == 0
    why = [x for x in r.stderr.splitlines() if x.startswith("abstain 2:")]  # beside the summary table
    assert len(why) == 1 and "no reference answer" in why[0] and "--field reference=COLUMN" in why[0], r.stderr


def test_a_reference_column_named_but_absent_says_so_in_the_why_line(tmp_path):
    """Before: `--field reference=gold_anwser` (a typo) abstained on every response with only 'group has no
    reference answer for the verifier': the hint naming --field was left out once the user had given one."""
    rows = [{"prompt": "2+2?", "completion": c, "gold_answer": "4"} for c in (r"\boxed{4}", r"\boxed{5}")]
    r, _ = _score_cli(tmp_path, rows, "--field", "reference=gold_anwser")
    assert r.exit_code == 0
    why = [x for x in r.stderr.splitlines() if x.startswith("abstain 2:")]
    assert why == ["abstain 2: group has no reference answer for the verifier; read from the column named by "
                   "--field reference=gold_anwser: check its spelling"], r.stderr
    r, out = _score_cli(tmp_path, rows, "--field", "reference=gold_answer")
    assert r.exit_code == 0 and out[0]["rewards"] == [1.0, 0.0] and "abstain" not in r.stderr


# ------------------------------------------------------------------ group ids of flat rows


def test_a_group_key_shaped_like_an_internal_key_is_not_merged_with_unkeyed_rows(tmp_path):
    # before: rows without a group key were gathered under the text 'prompt:[step, prompt]', so a file's own
    # group id of that spelling silently took their responses into its group
    for key in ('prompt:[null, "p"]', '[null, "p"]'):
        rows = [{"group_id": key, "prompt": "p", "response": "a"}, {"prompt": "p", "response": "b"}]
        got = [(g.id, g.responses) for g in read_groups(write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows]))]
        # sha256("p") = 148de9c5a7a4...: the unkeyed row's group is named by its prompt
        assert got == [(key, ["a"]), ("148de9c5a7a4", ["b"])]


def test_a_column_name_holding_a_colon_is_named_whole_in_errors(tmp_path):
    # before: "field 'Q': gold[1]: expected ..." (the message was cut at the first ": ", inside the name)
    p = write(tmp_path, "c.jsonl", [json.dumps({"q": "p", "responses": ["a"], "Q: gold": ["a", {}]})])
    with pytest.raises(InputError) as e:
        list(read_groups(p, fields={"reference": "Q: gold", "prompt": "q"}))
    assert str(e.value) == f"{p}:1: field 'Q: gold[1]': expected a string, a number or a list of them, got a dict"
    assert (e.value.field, e.value.detail) == ("Q: gold[1]", "expected a string, a number or a list of them, got a dict")


# ------------------------------------------------------------------ exact messages, exact groups


def whole(g):
    """Every field of a group, to compare with one written out by hand."""
    return (g.id, g.prompt, g.responses, g.reference, g.expert, g.labels, g.metadata)


MISSING_PROMPT = ("field 'prompt': missing (looked for prompt, problem, question, query; name yours with "
                  "--field prompt=COLUMN, or fields={'prompt': COLUMN} in Python)")


@pytest.mark.parametrize("row, message", [
    ({"group_id": "q", "prompt": "p", "response": 5},
     "field 'response': expected a string or a list of chat messages, got int"),
    ({"group_id": "q", "response": "a"}, MISSING_PROMPT),
    ({"group_id": True, "prompt": "p", "response": "a"}, "field 'group_id': expected a string or an integer, got boolean"),
    ({"group_id": "q", "prompt": "p", "response": "a", "answer": True},
     "field 'answer': expected a string or a number (or a list of them), got boolean: 'answer' is read as the "
     "reference answer; correctness goes in 'correct'"),
    ({"group_id": "q", "prompt": "p", "response": "a", "solution": 7}, "field 'solution': expected a string, got int"),
    ({"group_id": "q", "prompt": "p", "response": "a", "correct": 2},
     "field 'correct': expected a boolean (is this response correct?), got int"),
    ({"group_id": "q", "prompt": [{"role": "user", "content": [{"type": "text", "text": 5}]}], "response": "a"},
     "field 'prompt[0].content[0].text': expected a string, got int"),
])
def test_flat_row_errors_are_exact(tmp_path, row, message):
    p = write(tmp_path, "flat.jsonl", [json.dumps({"group_id": "z", "prompt": "p0", "response": "r0"}), json.dumps(row)])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == f"{p}:2: {message}"
    assert (e.value.path, e.value.line) == (str(p), 2)


@pytest.mark.parametrize("row, message", [
    ({"problem": "p", "responses": ["a"], "solution": 7}, "field 'solution': expected a string, got int"),
    ({"problem": "p", "responses": ["a"], "correct": 1}, "field 'correct': expected a list of booleans"),
    ({"problem": "p", "responses": ["a", "b"], "correct": [True, 2]}, "field 'correct': expected a list of booleans"),
    ({"responses": ["a"]}, MISSING_PROMPT),
])
def test_grouped_row_errors_are_exact(tmp_path, row, message):
    p = write(tmp_path, "in.jsonl", [GOOD, json.dumps(row)])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == f"{p}:2: {message}"


def test_flat_rows_make_whole_groups_in_first_seen_order(tmp_path):
    from rewardkit.runtime.inputs import to_groups

    rows = [{"group_id": "q1", "id": "r-1", "prompt": "P1", "response": "a", "answer": 3, "solution": "S1",
             "is_correct": True, "model": "m"},
            {"group_id": 7, "id": "r-2", "prompt": "P2", "response": "b"},
            {"group_id": "q1", "id": "r-3", "prompt": "P1", "response": "c", "is_correct": 0, "model": "m"}]
    groups = list(read_groups(write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])))
    # a row's own 'id' names the response, not the group: neither group id nor metadata
    assert [whole(g) for g in groups] == [("q1", "P1", ["a", "c"], "3", "S1", [True, False], {"model": "m"}),
                                          ("7", "P2", ["b"], None, None, None, {})]
    where: list[list[int]] = []
    list(to_groups(Path("f.jsonl"), iter(enumerate(rows, 1)), rows=where))
    assert where == [[1, 3], [2]]  # each group's record numbers, one per response
    where = []
    list(to_groups(Path("g.jsonl"), iter([(4, json.loads(GOOD)), (6, dict(json.loads(GOOD), id="b"))]), rows=where))
    assert where == [[4, 4], [6, 6]]


def test_labels_for_only_some_responses_name_the_labels_column(tmp_path):
    rows = [{"group_id": "q", "prompt": "p", "response": "a", "is_correct": True},
            {"group_id": "r", "prompt": "p2", "response": "x"},
            {"group_id": "q", "prompt": "p", "response": "b"}]
    p = write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == f"{p}:1: field 'is_correct': labels given for only some responses of the group"
    from rewardkit.runtime.inputs import read_numbered

    got = list(read_numbered(p, skip_bad=True))
    assert got[0] == (1, BadRecord(str(p), 1, "is_correct", "labels given for only some responses of the group"))
    assert [(n, whole(g)) for n, g in got[1:]] == [(2, ("r", "p2", ["x"], None, None, None, {}))]


def test_a_label_after_an_unlabelled_first_row_is_not_dropped(tmp_path):
    # the group's first row has no label, a later one has: the same refusal as the other order, not a group whose
    # labels were silently dropped (what the reader did while only the first row decided whether labels were read)
    rows = [{"group_id": "q", "prompt": "p", "response": "a"},
            {"group_id": "q", "prompt": "p", "response": "b", "correct": False}]
    p = write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == f"{p}:1: field 'correct': labels given for only some responses of the group"


def test_a_row_whose_prompt_or_reference_differs_from_its_group_is_refused(tmp_path):
    # a group id reused for another problem: before, the second row's prompt and answer were dropped and its response
    # was scored against the first problem's answer
    rows = [{"group_id": "q", "prompt": "What is 2+2?", "answer": "4", "response": "4"},
            {"group_id": "q", "prompt": "What is 3+4?", "answer": "7", "response": "7"},
            {"group_id": "q", "prompt": "What is 2+2?", "answer": "5", "response": "5"},
            {"group_id": "q", "prompt": "What is 2+2?", "response": "four"}]  # no reference: not a difference
    p = write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == (f"{p}:2: field 'prompt': differs from the prompt of its group (line 1: 'What is 2+2?'; "
                            "here: 'What is 3+4?'); one group id is one problem")
    from rewardkit.runtime.inputs import read_numbered

    got = list(read_numbered(p, skip_bad=True))
    assert got[:2] == [(2, BadRecord(str(p), 2, "prompt", "differs from the prompt of its group (line 1: "
                                     "'What is 2+2?'; here: 'What is 3+4?'); one group id is one problem",
                                     json.dumps(rows[1]))),
                       (3, BadRecord(str(p), 3, "answer", "differs from the reference of its group (line 1: '4'; "
                                     "here: '5'); one group id is one problem", json.dumps(rows[2])))]
    assert [(n, whole(g)) for n, g in got[2:]] == [(1, ("q", "What is 2+2?", ["4", "four"], "4", None, None, {}))]


def test_a_refused_row_leaves_no_trace_in_its_group(tmp_path):
    # --skip-bad: a group's first row refused for its label (before: an empty group was still yielded, or the group
    # kept the refused row's prompt and label column) and a later row refused for a different expert answer
    rows = [{"group_id": "q", "prompt": "p", "answer": "1", "response": "a", "correct": "yes"},
            {"group_id": "e", "prompt": "p2", "expert": "E", "response": "x"},
            {"group_id": "e", "prompt": "p2", "expert": "F", "response": "y"},
            {"group_id": "r", "prompt": "p3", "response": "b", "correct": "no"},
            {"group_id": "r", "prompt": "p3", "answer": "3", "response": "c", "correct": False}]
    p = write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])
    from rewardkit.runtime.inputs import read_numbered

    got = list(read_numbered(p, skip_bad=True))
    assert [(n, type(x).__name__, getattr(x, "field", None)) for n, x in got] == [
        (1, "BadRecord", "correct"), (3, "BadRecord", "expert"), (4, "BadRecord", "correct"), (2, "Group", None),
        (5, "Group", None)]
    assert got[1][1].message == "differs from the expert of its group (line 2: 'E'; here: 'F'); one group id is one problem"
    assert whole(got[3][1]) == ("e", "p2", ["x"], None, "E", None, {})
    assert whole(got[4][1]) == ("r", "p3", ["c"], "3", None, [False], {})


def test_a_row_differing_from_its_group_names_the_row_through_the_python_api():
    from rewardkit import score

    rows = [{"group_id": "q", "prompt": "p", "answer": "1", "response": "1"},
            {"group_id": "q", "prompt": "p", "answer": "2", "response": "2"}]
    with pytest.raises(ValueError, match=r"^row 1: field 'answer': differs from the reference of its group "
                                         r"\(row 0: '1'; here: '2'\)"):
        score(rows)


VERL_BASE = {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 6*7?"}],
             "reward_model": {"style": "rule", "ground_truth": "42"}, "extra_info": {"index": 3}}
VERL_META = {"data_source": "openai/gsm8k", "extra_info": {"index": 3}, "messages": VERL_BASE["prompt"]}


def test_verl_reward_model_is_read_and_left_out_of_metadata(tmp_path):
    flat = [dict(VERL_BASE, uid="u1", response=r) for r in ("a", "b")]
    (g,) = read_groups(write(tmp_path, "flat.jsonl", [json.dumps(r) for r in flat]))
    assert whole(g) == ("u1", "What is 6*7?", ["a", "b"], "42", None, None, VERL_META)
    (h,) = read_groups(write(tmp_path, "grouped.jsonl", [json.dumps(dict(VERL_BASE, id="v", responses=["a"]))]))
    assert whole(h) == ("v", "What is 6*7?", ["a"], "42", None, None, VERL_META)
    # a reference of its own ('answer' comes first): reward_model is then just metadata, kept
    own = dict(VERL_BASE, answer="41")
    (f,) = read_groups(write(tmp_path, "own.jsonl", [json.dumps(dict(own, uid="u", response="a"))]))
    (k,) = read_groups(write(tmp_path, "own2.jsonl", [json.dumps(dict(own, id="v", responses=["a"]))]))
    for x in (f, k):
        assert x.reference == "41" and x.metadata == dict(VERL_META, reward_model=VERL_BASE["reward_model"])


def test_a_flat_column_named_with_dots_and_a_path_two_deep(tmp_path):
    # a flattened table (pandas.json_normalize) has the column 'reward_model.ground_truth' itself
    (g,) = read_groups(write(tmp_path, "f.jsonl", [json.dumps({"prompt": "p", "responses": ["a"],
                                                                "reward_model.ground_truth": "7"})]))
    assert g.reference == "7" and g.metadata == {}
    row = {"prompt": "p", "responses": ["a"], "meta": {"gold": {"value": "8"}, "other": 1}}
    (h,) = read_groups(write(tmp_path, "h.jsonl", [json.dumps(row)]), fields={"reference": "meta.gold.value"})
    assert h.reference == "8"


# ------------------------------------------------------------------ chat messages


def test_chat_prompt_ending_in_an_assistant_turn_reads_the_last_user_turn(tmp_path):
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"},
            {"role": "assistant", "content": "Let me"}]  # a prefilled answer
    (g,) = read_groups(write(tmp_path, "c.jsonl", [json.dumps({"id": "c", "prompt": chat, "responses": ["x"]})]))
    assert g.prompt == "Q2" and g.metadata == {"messages": chat}


def test_a_response_given_as_a_conversation_is_its_last_message(tmp_path):
    conv = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    (g,) = read_groups(write(tmp_path, "g.jsonl", [json.dumps({"prompt": "p", "responses": [conv]})]))
    (f,) = read_groups(write(tmp_path, "f.jsonl", [json.dumps({"prompt": "p", "response": conv})]))
    assert g.responses == ["A"] and f.responses == ["A"]


def test_content_parts_join_their_text_parts_only(tmp_path):
    parts = [{"text": "A"}, {"type": "image_url", "image_url": {"url": "http://x/i.png"}}, {"type": "text", "text": "B"}]
    row = {"prompt": [{"role": "user", "content": parts}], "responses": ["x"]}
    (g,) = read_groups(write(tmp_path, "c.jsonl", [json.dumps(row)]))
    assert g.prompt == "AB"  # a part with no type is text; an image part is left out


# ------------------------------------------------------------------ skip_bad: every reject, and the rest read


def test_skip_bad_reports_every_kind_of_bad_line_and_reads_on(tmp_path):
    pad = "x" * 600
    bad_utf8 = b'{"problem": "caf\xe9", "responses": ["x"], "pad": "' + pad.encode() + b'"}'
    bad_json = '{"pad": "' + pad + '", oops}'
    deep = '{"problem": ' + "[" * 100_000
    digits = '{"answer": ' + "9" * 5000 + "}"
    array = "[" + "1, " * 300 + "1]"
    empty = '{"id": "c", "problem": "p", "responses": []}'
    lines = [GOOD, bad_utf8, "", bad_json, deep, digits, array, json.dumps(dict(json.loads(GOOD), id="b")),
             empty, GOOD, json.dumps(dict(json.loads(GOOD), id="d"))]
    p = write(tmp_path, "in.jsonl", lines)
    items = list(read_groups(p, skip_bad=True))
    assert [g.id for g in items if not isinstance(g, BadRecord)] == ["a", "b", "d"]
    s = str(p)
    assert [i for i in items if isinstance(i, BadRecord)] == [
        BadRecord(s, 2, None, "not valid UTF-8 (byte 16 of the line: b'\\xe9')",
                  ('{"problem": "caf\ufffd", "responses": ["x"], "pad": "' + pad)[:500]),
        BadRecord(s, 4, None, "malformed JSON (Expecting property name enclosed in double quotes at column 613)",
                  bad_json[:500]),
        BadRecord(s, 5, None, "JSON nested too deeply", deep[:500]),
        BadRecord(s, 6, None, "unreadable JSON value (Exceeds the limit (4300 digits) for integer string "
                  "conversion: value has 5000 digits)", digits[:500]),
        BadRecord(s, 7, None, "expected a JSON object, got list", array[:500]),
        BadRecord(s, 9, "responses", "empty response list", empty),  # the record as it was read
        BadRecord(s, 10, "id", "duplicate group id 'a' (first at line 1)"),
    ]
    assert len(items[1].raw) == 500


@pytest.mark.parametrize("first, message", [
    ("[1, 2 x]", "malformed JSON (Expecting ',' delimiter at column 7)"),
    ('{"a": 1, oops', "malformed JSON (Expecting property name enclosed in double quotes at column 10)"),
    (' {"a": 1, x}', "malformed JSON (Expecting property name enclosed in double quotes at column 11)"),
])
def test_a_broken_first_line_that_opens_json_is_not_taken_for_csv(tmp_path, first, message):
    p = write(tmp_path, "in.jsonl", [first, GOOD])
    items = list(read_groups(p, skip_bad=True))
    assert items[0] == BadRecord(str(p), 1, None, message, first + "\n") and items[1].id == "a"


def test_a_later_line_without_a_brace_is_a_bad_record_not_csv(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, "oops, no", json.dumps(dict(json.loads(GOOD), id="b"))])
    items = list(read_groups(p, skip_bad=True))
    assert items[1] == BadRecord(str(p), 2, None, "malformed JSON (Expecting value at column 1)", "oops, no\n")
    assert [type(i).__name__ for i in items] == ["Group", "BadRecord", "Group"]


def test_blank_lines_between_records_are_skipped(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, "", "   ", json.dumps(dict(json.loads(GOOD), id="b"))])
    assert [g.id for g in read_groups(p)] == ["a", "b"]


def test_bad_record_row_and_input_error_fields():
    b = BadRecord("in.jsonl", 3, "responses", "empty response list", '{"responses": []}')
    assert b.to_row() == {"path": "in.jsonl", "line": 3, "field": "responses", "error": "empty response list",
                          "raw": '{"responses": []}'}
    e = InputError(Path("d/in.jsonl"), None, None, "no records")
    assert (e.path, e.line, e.field, e.detail, str(e)) == ("d/in.jsonl", None, None, "no records", "d/in.jsonl: no records")


# ------------------------------------------------------------------ Parquet and saved datasets: rows are numbered from 1


def test_parquet_and_dataset_rows_are_numbered_from_one(tmp_path):
    import datasets

    rows = [{"problem": f"p{i}", "responses": ["a"] if i != 3 else []} for i in (1, 2, 3)]
    ds = datasets.Dataset.from_list(rows[:2])
    ds.to_parquet(str(tmp_path / "r.parquet"))
    ds.save_to_disk(str(tmp_path / "ds"))
    assert [g.id for g in read_groups(tmp_path / "r.parquet")] == ["r-1", "r-2"]
    assert [g.id for g in read_groups(tmp_path / "ds")] == ["ds-1", "ds-2"]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "bad.parquet"))
    with pytest.raises(InputError) as e:
        list(read_groups(tmp_path / "bad.parquet"))
    assert str(e.value) == f"{tmp_path / 'bad.parquet'}:3: field 'responses': empty response list"


def test_a_saved_dataset_dict_is_read_when_it_has_one_split(tmp_path):
    import datasets

    one = datasets.Dataset.from_list([{"problem": "p", "responses": ["a", "b"]}])
    datasets.DatasetDict({"train": one}).save_to_disk(str(tmp_path / "one"))
    assert [whole(g) for g in read_groups(tmp_path / "one")] == [("one-1", "p", ["a", "b"], None, None, None, {})]
    datasets.DatasetDict({"train": one, "test": one}).save_to_disk(str(tmp_path / "two"))
    with pytest.raises(InputError) as e:
        list(read_groups(tmp_path / "two"))
    assert str(e.value) == f"{tmp_path / 'two'}: dataset has splits ['train', 'test']; pass the folder of one split"


def test_parquet_values_json_cannot_hold_are_read(tmp_path):
    # a chat log with message timestamps: grouping, ids and a reject's raw row take them as text
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    when = datetime.datetime(2024, 5, 1, 12, 0)
    msgs = [{"role": "user", "content": "2+2?", "ts": when}]
    pq.write_table(pa.Table.from_pylist([{"prompt": msgs, "completion": c} for c in ("4", "5")]), tmp_path / "t.parquet")
    (g,) = read_groups(tmp_path / "t.parquet")
    assert (g.prompt, g.responses, g.metadata) == ("2+2?", ["4", "5"], {"messages": msgs})
    # sha256('[{"content": "2+2?", "role": "user", "ts": "2024-05-01 12:00:00"}]') = e69ccc8b1dca...
    assert g.id == "e69ccc8b1dca"
    pq.write_table(pa.Table.from_pylist([{"problem": "p", "responses": [], "day": datetime.date(2024, 1, 2)}]),
                   tmp_path / "d.parquet")
    (b,) = read_groups(tmp_path / "d.parquet", skip_bad=True)
    assert b == BadRecord(str(tmp_path / "d.parquet"), 1, "responses", "empty response list",
                          '{"problem": "p", "responses": [], "day": "2024-01-02"}')


# ------------------------------------------------------------------ files named .json/.csv that hold JSONL


@pytest.mark.parametrize("name", ["rows.pq", "ROWS.PARQUET", "rows"])
def test_parquet_is_known_by_its_magic_bytes_whatever_its_name(tmp_path, name):
    """Before: a Parquet file named other than ``*.parquet`` (lower case) was read as JSONL: 'line 1: not valid
    UTF-8', with a --skip-bad hint that rejected every line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([json.loads(GOOD)]), tmp_path / name)
    (g,) = read_groups(tmp_path / name)
    assert (g.id, g.responses, g.labels) == ("a", ["2", "3"], [True, False])


def test_a_fifo_without_writer_reads_as_empty_and_a_device_is_refused_by_every_reader(tmp_path):
    """Before: only `score` checked its input's kind. `eval accuracy FIFO` (read_groups directly) hung forever
    waiting for a writer, and `eval accuracy /dev/zero` read one endless line until memory ran out."""
    import threading

    fifo = tmp_path / "rows"
    os.mkfifo(fifo)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(list(read_groups(fifo))), daemon=True)
    reader.start()
    reader.join(10)
    try:
        assert not reader.is_alive() and got == [[]], "read_groups blocked on a FIFO with no writer"
    finally:
        if reader.is_alive():  # unblock the old reader: a writer that closes at once
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    with pytest.raises(InputError) as e:
        load_groups("/dev/null")
    assert str(e.value) == "/dev/null: is a character device, not a file of rows; save them to a file and read that"


def test_a_compressed_file_is_refused_by_name_even_with_skip_bad(tmp_path):
    """Before: a gzip file was read line by line as JSONL; with --skip-bad every 'line' was a rejected record."""
    import gzip

    p = tmp_path / "rows.jsonl.gz"
    p.write_bytes(gzip.compress((GOOD + "\n").encode()))
    with pytest.raises(InputError) as e:
        load_groups(p, skip_bad=True)
    assert str(e.value) == (f"{p}: gzip-compressed, which rewardkit does not read; decompress it (zcat {p} > "
                            f"rows.jsonl) or pass it through a pipe: <(zcat {p})")


@pytest.mark.parametrize("head, reads", [
    (b"\xef\xbb\xbf\n \t\r\n", True),  # a byte-order mark and blank lines before the first object
    (b"\n" * 4095, True),  # the first object within the first 4 KiB
    (b"\n" * 4096, False),  # ...and past it: taken for what the suffix says
    (b"X", False),  # only blanks are looked past
])
def test_jsonl_under_another_suffix_is_found_by_its_first_bytes(tmp_path, head, reads):
    p = tmp_path / "rows.json"
    p.write_bytes(head + GOOD.encode() + b"\n")
    if reads:
        assert [g.id for g in read_groups(p)] == ["a"]
    else:
        with pytest.raises(InputError, match=r"rows.json: a JSON document is not an input format rewardkit reads"):
            list(read_groups(p))


# ------------------------------------------------------------------ read_groups / read_numbered options


def test_read_options_reach_the_reader(tmp_path):
    from rewardkit.runtime.inputs import read_numbered

    flat = write(tmp_path, "flat.jsonl", [json.dumps({"qid": k, "prompt": "p" + k, "response": r})
                                          for k, r in (("1", "a"), ("2", "b"), ("1", "c"))])
    assert [(g.id, g.responses) for g in read_groups(flat, group_key="qid")] == [("1", ["a", "c"]), ("2", ["b"])]
    with pytest.raises(InputError) as e:  # told the rows are grouped: each must have a responses list
        list(read_groups(flat, fmt="grouped", group_key="qid"))
    assert str(e.value).startswith(f"{flat}:1: field 'responses': missing (looked for responses, completions, generations;")
    assert [g.id for g in read_groups(flat, fmt="flat", group_key="qid")] == ["1", "2"]
    grouped = write(tmp_path, "g.jsonl", [GOOD])
    assert [g.id for g in read_groups(grouped, fmt="grouped")] == ["a"]
    with pytest.raises(InputError) as e:
        list(read_groups(grouped, fmt="csv"))
    assert str(e.value) == f"{grouped}: unknown format 'csv' (expected grouped or flat)"
    # source: the bytes come from elsewhere (a spooled pipe); the name and default ids are the path's
    src = write(tmp_path, "spool.bin", ['{"problem": "p", "responses": ["x"]}'])
    (g,) = read_groups(tmp_path / "named.jsonl", source=src)
    assert g.id == "named-1"
    # read_numbered: each group with the line it starts at; a bad line raises unless told to skip
    p = write(tmp_path, "n.jsonl", [GOOD, "{oops", json.dumps(dict(json.loads(GOOD), id="b"))])
    with pytest.raises(InputError, match=r"n.jsonl:2: malformed JSON"):
        list(read_numbered(p))
    got = [(n, type(x).__name__) for n, x in read_numbered(p, skip_bad=True)]
    assert got == [(1, "Group"), (2, "BadRecord"), (3, "Group")]


def test_field_mapping_errors_are_exact():
    from rewardkit.runtime.inputs import field_names

    with pytest.raises(ValueError) as e:
        field_names({"prompt": ""})
    assert str(e.value) == "field mapping prompt='': expected the name of a column"
    with pytest.raises(ValueError) as e:
        field_names({"prompt": 5})
    assert str(e.value) == "field mapping prompt=5: expected the name of a column"
    assert field_names({"prompt": "q"}, group_key="k")["prompt"] == ("q",)
    assert field_names(group_key="k")["group_id"] == ("k",)


def test_the_shape_is_taken_from_the_first_record(tmp_path):
    # a responses list makes a grouped row even beside a 'response' column; an empty response is still flat
    both = {"id": "b", "prompt": "p", "responses": ["a", "b"], "response": "legacy"}
    assert [g.responses for g in read_groups(write(tmp_path, "b.jsonl", [json.dumps(both)]))] == [["a", "b"]]
    empty = dict(both, responses=[])
    with pytest.raises(InputError, match=r"e.jsonl:1: field 'responses': empty response list"):
        list(read_groups(write(tmp_path, "e.jsonl", [json.dumps(empty)])))
    flat = [{"group_id": "q", "prompt": "p", "response": ""}, {"group_id": "q", "prompt": "p", "response": "x"}]
    assert [g.responses for g in read_groups(write(tmp_path, "f.jsonl", [json.dumps(r) for r in flat]))] == [["", "x"]]
    # neither: read as grouped, so the message names the responses list
    p = write(tmp_path, "n.jsonl", ['{"problem": "p"}'])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == (f"{p}:1: field 'responses': missing (looked for responses, completions, generations; "
                            "name yours with --field responses=COLUMN, or fields={'responses': COLUMN} in Python)")


def test_a_field_mapping_applies_to_grouped_rows_and_to_verl_dump_columns(tmp_path):
    (g,) = read_groups(write(tmp_path, "g.jsonl", [json.dumps({"q": "2+2?", "outs": ["4"]})]),
                       fields={"prompt": "q", "responses": "outs"})
    assert (g.prompt, g.responses) == ("2+2?", ["4"])
    # a verl dump read with the user's own names for its columns is not converted behind their back
    p = verl_dump(tmp_path, 3, [("q", "a", "4", 1.0), ("q", "b", "4", 0.0)])
    (h,) = read_groups(p, fields={"prompt": "input", "response": "output", "reference": "gts"})
    assert (h.prompt, h.responses, h.reference) == ("q", ["a", "b"], "4")
    assert h.metadata == {"score": 1.0, "step": 3, "acc": 1.0, "request_id": "r0"}


# ------------------------------------------------------------------ ids derived from prompts


def test_prompt_ids_are_pinned():
    from rewardkit.runtime.inputs import prompt_id

    # sha256("What is 2+2?") = 52cb6b5e4a038af1..., sha256 of the messages' sorted-key JSON = 7c9833ca6a9e...
    assert prompt_id("What is 2+2?") == "52cb6b5e4a03"
    assert prompt_id("What is 2+2?", 3) == "step3-52cb6b5e4a03"
    assert prompt_id("What is 2+2?", 0) == "step0-52cb6b5e4a03"
    assert prompt_id([{"role": "user", "content": "2+2?"}]) == "7c9833ca6a9e"
    assert prompt_id([{"content": "2+2?", "role": "user"}]) == "7c9833ca6a9e"  # key order is not part of a prompt
    # a lone surrogate (JSON "\ud800") is hashed as its bytes ed a0 80 (sha256 = 91a681b99855...)
    assert prompt_id("\ud800") == "91a681b99855"


def test_flat_rows_of_one_chat_prompt_join_whatever_their_key_order(tmp_path):
    a = [{"role": "user", "content": "2+2?"}]
    b = [{"content": "2+2?", "role": "user"}]
    rows = [{"prompt": a, "completion": "4"}, {"prompt": b, "completion": "5"}]
    (g,) = read_groups(write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows]))
    assert (g.id, g.responses) == ("7c9833ca6a9e", ["4", "5"])
    (h,) = read_groups(write(tmp_path, "s.jsonl", ['{"prompt": "\\ud800", "completion": "x", "step": 2}']))
    assert h.id == "step2-91a681b99855"


def test_an_unkeyed_group_whose_id_a_later_key_repeats_is_a_duplicate(tmp_path):
    rows = [{"prompt": "What is 2+2?", "response": "a"}, {"group_id": "52cb6b5e4a03", "prompt": "q", "response": "b"}]
    p = write(tmp_path, "f.jsonl", [json.dumps(r) for r in rows])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert str(e.value) == f"{p}:2: field 'id': duplicate group id '52cb6b5e4a03' (first at line 1)"


# ------------------------------------------------------------------ records from a caller (the Python API's rows)


def test_to_groups_on_records_a_caller_gives():
    from rewardkit.runtime.inputs import to_groups

    rec = {"id": "a", "problem": "p", "responses": ["x"]}
    bad = BadRecord("rows", 2, None, "unreadable")
    with pytest.raises(InputError) as e:  # a reader's reject raises unless told to skip
        list(to_groups(Path("rows"), iter([(1, rec), (2, bad)])))
    assert str(e.value) == "rows:2: unreadable"
    # records without a number: a duplicate is still refused, with no "first at" to point to
    got = [x for _, x in to_groups(Path("rows"), iter([(None, rec), (None, rec)]), skip_bad=True)]
    assert got[1] == BadRecord("rows", None, "id", "duplicate group id 'a'")
    # a record JSON cannot write (it refers to itself) is shown as Python writes it
    loop: dict = {"problem": "p", "responses": []}
    loop["self"] = loop
    ((_, b),) = to_groups(Path("rows"), iter([(1, loop)]), skip_bad=True)
    assert b == BadRecord("rows", 1, "responses", "empty response list", "{'problem': 'p', 'responses': [], 'self': {...}}")
    loop["pad"] = "y" * 600
    ((_, b),) = to_groups(Path("rows"), iter([(1, loop)]), skip_bad=True)
    assert b.raw == ("{'problem': 'p', 'responses': [], 'self': {...}, 'pad': '" + "y" * 600)[:500]
    long = {"problem": "p", "responses": [], "pad": "z" * 600}
    ((_, b),) = to_groups(Path("rows"), iter([(1, long)]), skip_bad=True)
    assert b.raw == ('{"problem": "p", "responses": [], "pad": "' + "z" * 600)[:500]


def test_group_from_record():
    from rewardkit.runtime.inputs import group_from_record

    g = group_from_record({"q": "2+2?", "responses": ["4"], "answer": 4}, fields={"prompt": "q"})
    assert whole(g) == ("<record>-1", "2+2?", ["4"], "4", None, None, {})
    assert group_from_record({"problem": "p", "responses": ["x"]}, "batch.jsonl", 7).id == "batch-7"
    with pytest.raises(InputError) as e:
        group_from_record({"problem": "p"})
    assert str(e.value).startswith("<record>:1: field 'responses': missing")


def test_one_line_error_text():
    from rewardkit.runtime.inputs import _one_line

    assert _one_line(OSError("bad\n   footer\tbytes")) == "bad footer bytes"
    assert _one_line(ValueError()) == "ValueError"  # an exception with no message says what it is
    assert _one_line(ValueError("w " * 400)) == ("w " * 150)[:300]


# ------------------------------------------------------------------ spooling a pipe


def test_spool_stream_copies_and_hashes_a_file_and_a_fifo(tmp_path):
    import io
    import threading

    from rewardkit.runtime.inputs import spool_stream

    src = tmp_path / "abc.txt"
    src.write_bytes(b"abc")
    # the SHA-256 test vector of "abc" (FIPS 180-2)
    assert spool_stream(src, tmp_path / "copy") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert (tmp_path / "copy").read_bytes() == b"abc"
    # a FIFO carrying more than one read's worth (1 MiB), written in two parts with the reader waiting between
    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    first, second = os.urandom(3 << 20), b"tail"
    into = tmp_path / "spooled"

    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads: the write end opens at once
    wfd = os.open(fifo, os.O_WRONLY)  # the writer is there before the spooler opens the FIFO

    def writer():
        with open(wfd, "wb") as w:
            w.write(first)
            w.flush()
            for _ in range(6000):  # until the reader has written the first part out (less what it may buffer)
                if into.exists() and into.stat().st_size >= len(first) - io.DEFAULT_BUFFER_SIZE:
                    break
                threading.Event().wait(0.01)
            w.write(second)

    t = threading.Thread(target=writer)
    t.start()
    try:
        digest = spool_stream(fifo, into)
    finally:
        t.join()
        os.close(keep)
    import hashlib

    assert into.read_bytes() == first + second
    assert digest == hashlib.sha256(first + second).hexdigest()


def test_spool_stream_of_a_fifo_without_a_writer_is_empty(tmp_path):
    import threading

    from rewardkit.runtime.inputs import spool_stream

    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(spool_stream(fifo, tmp_path / "spooled")), daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # blocked in open(): release it with a writer that writes nothing, then fail
        os.close(os.open(fifo, os.O_WRONLY))
        t.join()
        pytest.fail("spool_stream blocked on a FIFO with no writer")
    assert out == ["e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"]  # SHA-256 of nothing
    assert (tmp_path / "spooled").read_bytes() == b""


def test_a_symbolic_link_to_a_file_of_rows_is_read_as_the_file(tmp_path):
    src = write(tmp_path, "in.jsonl", [GOOD])
    link = tmp_path / "latest.jsonl"
    link.symlink_to(src)
    assert [g.id for g in read_groups(link)] == [g.id for g in read_groups(src)] == [json.loads(GOOD)["id"]]


@pytest.mark.parametrize("name", ["rows.parquet", "rows.Parquet"])
def test_a_file_named_parquet_is_read_as_parquet_in_any_case_of_its_suffix(tmp_path, name):
    p = write(tmp_path, name, [GOOD])  # JSON lines under a Parquet name: Parquet's reader says what is wrong
    with pytest.raises(InputError, match="not a readable Parquet file"):
        list(read_groups(p))


def test_a_fifo_whose_writer_is_slow_is_waited_for(tmp_path):
    """The FIFO is opened without blocking (no writer: empty, never a hang), then read blocking: a writer that
    writes after the reader opened is read whole, not taken for the end of the rows."""
    import threading

    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer open at once: it is there before the reader
    wfd = os.open(fifo, os.O_WRONLY)

    def writer():
        with open(wfd, "wb") as w:
            threading.Event().wait(0.3)  # the reader is waiting by now
            w.write((GOOD + "\n").encode())

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        got = [g.id for g in read_groups(fifo)]
    finally:
        t.join(10)
        os.close(keep)
    assert got == [json.loads(GOOD)["id"]]

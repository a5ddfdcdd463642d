"""Sample n responses per benchmark problem with any judge backend and write the grouped rollouts file that
``rewardkit score`` and ``rewardkit eval`` read. Resumable: finished problems are skipped on a re-run, rows are
appended batch by batch with fsync, a failed request writes nothing and is retried on the next run. The output
is owned by the ``JobOutput`` that owns ``rewardkit score``'s (``rewardkit.runtime.output``): manifest, lock,
and a user's file never touched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rewardkit.evals.loaders import Problem

from rewardkit.backends.spec import redact

if TYPE_CHECKING:
    from rewardkit.runtime.output import JobOutput


@dataclass
class GenerateSummary:
    problems: int = 0
    generated_now: int = 0
    skipped_done: int = 0
    failed: list[str] = field(default_factory=list)  # "id: error" of requests that returned no texts
    graded: bool = False


def _row(p: Problem, texts: Sequence[str], bench: str, model: str, finish: Sequence[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": p.id, "problem": p.question, "answer": p.answer, "responses": list(texts),
                           "benchmark": bench, "model": model, "kind": p.kind, "finish_reasons": list(finish)}
    if p.kind == "code" and isinstance(p.tests, dict):  # LiveCodeBench: the columns the code verifier reads
        row.update({"public_test_cases": p.tests["public"], "private_test_cases": p.tests["private"],
                    "metadata": {"func_name": p.entry_point}})
    elif p.kind == "code":  # HumanEval
        row.update({"test": p.tests, "entry_point": p.entry_point})
    return row


def grade_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add ``correct`` labels: math rows with the answer verifier, code rows with the code verifier in the
    sandbox. A row with any failed check is left unlabelled rather than given a guessed 0."""
    from rewardkit.scoring import get_scorer
    from rewardkit.types import Group

    for kind, scorer in (("math", "verifier"), ("code", "code")):
        todo = [r for r in rows if r.get("kind", "math") == kind and (kind == "code" or r.get("answer") is not None)]
        if not todo:
            continue
        keep = ("id", "problem", "answer", "responses", "kind")
        scores = get_scorer(scorer).score([
            Group(r["id"], r["problem"], r["responses"], reference=r.get("answer"),
                  metadata={k: v for k, v in r.items() if k not in keep}) for r in todo])
        for r, s in zip(todo, scores):
            if s.mask.all():
                r["correct"] = [bool(x >= 1.0) for x in s.rewards]
    return rows


def _generator(spec: str) -> Callable[[list], list]:
    """Ray worker factory: load the backend once per actor; generate for a batch of (index, problem, request)."""
    from rewardkit.backends import load_backend

    be = load_backend(spec)
    return functools.partial(_generate_batch, be)


def _generate_batch(be: Any, items: list) -> tuple[str, list]:
    """One backend call for a batch of (index, problem, request): (the backend's model id, completions)."""
    return getattr(be, "model_id", "") or "", be.generate([r for _, _, r in items])


def generate_manifest(backend: Any, *, bench: str = "", n: int, max_tokens: int,
                      temperature: float, top_p: float, seed: int, grade: bool) -> dict[str, Any]:
    """What a rollouts file's rows depend on (the model, the sampling settings, the benchmark): a re-run
    resumes only a file whose manifest matches (``rewardkit.runtime.output``). A benchmark file is
    identified by its SHA-256, a named one by its name."""
    from rewardkit.runtime.output import file_kind, input_digest, output_manifest

    path = bench if bench and file_kind(bench, follow=True) in ("regular file", "directory") else None
    options = {"judge": backend, "bench": bench, "n": n, "max_tokens": max_tokens, "temperature": temperature,
               "top_p": top_p, "seed": seed, "grade": grade}
    return output_manifest("generate", None, options, path, input_digest(path) if path else None)


def claim_output(out: str | Path, backend: Any, *, bench: str = "", n: int, max_tokens: int, temperature: float,
                 top_p: float, seed: int, grade: bool, restart: bool = False) -> JobOutput:
    """The ``JobOutput`` of a generation into ``out``, claimed: refused (``JobError``), creating nothing, when
    ``out`` is not this job's to write. The CLI claims it before it checks the model and hands it to
    ``generate_rollouts``."""
    from rewardkit.runtime.output import JobOutput

    manifest = generate_manifest(backend, bench=bench, n=n, max_tokens=max_tokens, temperature=temperature,
                                 top_p=top_p, seed=seed, grade=grade)
    inp = bench if bench and Path(bench).exists() else None
    return JobOutput(out, manifest, restart=restart, inp=inp).claim()


def generate_rollouts(problems: Sequence[Problem], backend: Any, out: str | Path | JobOutput, *, n: int = 8,
                      max_tokens: int = 1024, temperature: float = 0.7, top_p: float = 0.95, seed: int = 0,
                      batch_size: int = 4, bench: str = "", grade: bool = True, ray: Any = None,
                      restart: bool = False, on_start: Callable[[int, int], None] | None = None,
                      on_batch: Callable[[int], None] | None = None,
                      on_mkdir: Callable[[Path], None] | None = None) -> GenerateSummary:
    """Sample ``n`` responses per problem (one request of ``n`` samples each, seed = ``seed`` + index) into
    ``out``; with ``grade``, math rows get ``correct`` labels from the verifier. ``ray``: a
    ``rewardkit.runtime.ray_runner.RayConfig`` to generate on a Ray cluster (one backend actor per GPU or CPU slot,
    ``backend`` then a spec string); rows are written in the same order as a local run.

    ``out`` follows the rule ``rewardkit score`` follows (one ``JobOutput``): only a file a rewardkit job
    wrote, with its manifest, is resumed; anything else (a user's file, another job's output, a folder) is
    refused and left as it was, before the model loads. ``restart`` starts over an output of another job.
    ``out`` may also be the ``JobOutput`` that ``claim_output`` returned for these settings (claimed once)."""
    from rewardkit.backends import ChatRequest, load_backend

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if ray is not None and not isinstance(backend, str):
        raise ValueError("generation on Ray needs a backend spec string (each actor loads its own backend)")
    from rewardkit.runtime.output import JobOutput

    if isinstance(out, JobOutput):  # claimed by the caller: it must be this generation's
        want = generate_manifest(backend, bench=bench, n=n, max_tokens=max_tokens, temperature=temperature,
                                 top_p=top_p, seed=seed, grade=grade)
        if out.manifest != want or out.restart != restart:
            raise ValueError(f"{out.path}: claimed for other settings than this generation's; claim it with "
                             "claim_output(...) given the same settings")
        output = out
    else:
        output = claim_output(out, backend, bench=bench, n=n, max_tokens=max_tokens, temperature=temperature,
                              top_p=top_p, seed=seed, grade=grade, restart=restart)  # before the model loads
    be = load_backend(backend) if ray is None else None
    with output.open(on_mkdir):  # one writer per rollouts file
        done = output.done()
        todo = [(i, p) for i, p in enumerate(problems) if p.id not in done]
        s = GenerateSummary(problems=len(problems), skipped_done=len(problems) - len(todo), graded=grade)
        if on_start:
            on_start(len(problems), s.skipped_done)
        batches = ([(i, p, ChatRequest(p.messages(), max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                       n=n, seed=seed + i)) for i, p in todo[b:b + batch_size]]
                   for b in range(0, len(todo), batch_size))
        pool = None
        if ray is None:
            done_batches = ((items, _generate_batch(be, items)) for items in batches)
        else:
            from rewardkit.runtime.ray_runner import RayBatchPool

            pool = RayBatchPool(functools.partial(_generator, backend), ray, uses_model=True)
            done_batches = pool.map(batches)
        for items, (model_id, completions) in done_batches:
            model = redact(model_id or str(backend))
            batch = [(i, p) for i, p, _ in items]
            rows = []
            for (_, p), c in zip(batch, completions):
                if c.status != "ok" or len(c.texts) != n:
                    s.failed.append(f"{p.id}: {c.status} {c.error or f'{len(c.texts)} of {n} texts'}")
                    continue
                rows.append(_row(p, c.texts, bench, model, c.finish_reasons))
            output.append(grade_rows(rows) if grade else rows)
            s.generated_now += len(rows)
            if on_batch:
                on_batch(len(batch))
        if pool is not None:
            pool.close()
        output.merge([p.id for p in problems])  # one row per problem, in the benchmark's order
    return s

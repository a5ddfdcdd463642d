"""Options declared once (``rewardkit.options``): one coercer for ``-o key=value``, judge specs and the TTS CLI."""

from __future__ import annotations

from dataclasses import fields
from typing import Literal, Optional

import pytest

from rewardkit.backends import parse_spec
from rewardkit.backends.http import HTTPBackend, HTTPOptions
from rewardkit.backends.llamacpp_backend import LlamaCppBackend
from rewardkit.backends.transformers_backend import TransformersBackend
from rewardkit.backends.vllm_backend import VLLMBackend
from rewardkit.options import Options, coerce, coerce_options, option
from rewardkit.scoring import get_scorer


def test_coerce_types():
    assert coerce("true", bool) is True and coerce("off", bool) is False
    assert coerce("3", int) == 3 and coerce("0.5", float) == 0.5 and coerce("x", str) == "x"
    assert coerce("none", Optional[int]) is None and coerce("4", int | None) == 4 and coerce("null", float | None) is None
    assert coerce("live", Literal["live", "round_robin"]) == "live"
    assert coerce("1, 2,4", tuple[int, ...]) == (1, 2, 4)
    for value, t, message in [("maybe", bool, "must be true or false"), ("1.5", int, "must be an integer"),
                              ("nan", float, "must be a finite number"), ("inf", float, "finite"),
                              ("logits", Literal["generate", "logit"], "must be one of generate, logit, got 'logits'"),
                              ("1,x", tuple[int, ...], "must be an integer, got 'x'")]:
        with pytest.raises(ValueError, match=message):
            coerce(value, t)


def test_scorer_options_and_judge_specs_are_typed_by_the_same_rules():
    """The same strings give the same values and the same messages through `-o key=value` (scorers) and a
    judge spec's query (backends): one coercer, ``rewardkit.options.coerce``."""
    sc = get_scorer("critic", judge="smollm2", max_tokens="64", temperature="0.5", mode="logit")
    assert (sc.options.max_tokens, sc.options.temperature, sc.options.mode) == (64, 0.5, "logit")
    _, kw = parse_spec("http://h:1/v1?retries=2&timeout=0.5")
    assert (kw["retries"], kw["timeout"]) == (2, 0.5)
    for (scorer_key, spec_key), bad, message in [(("temperature", "timeout"), "nan", "must be a finite number"),
                                                  (("max_tokens", "retries"), "1.0", "must be an integer")]:
        with pytest.raises(ValueError, match=f"option '{scorer_key}': {message}, got '{bad}'"):
            get_scorer("critic", **{scorer_key: bad})
        with pytest.raises(ValueError, match=f"option '{spec_key}': {message}, got '{bad}'"):
            parse_spec(f"http://h:1/v1?{spec_key}={bad}")


def test_every_backend_declares_its_options_once():
    """Each backend's options are a frozen Options dataclass with a type, a default and a help per field;
    the constructor takes exactly those keywords (vLLM also passes engine arguments through)."""
    for cls in (TransformersBackend, HTTPBackend, VLLMBackend, LlamaCppBackend):
        assert issubclass(cls.Options, Options) and cls.Options.__dataclass_params__.frozen
        assert all(f.metadata.get("help") for f in fields(cls.Options)), cls
    assert "max_prompt_tokens" in {f.name for f in fields(TransformersBackend.Options)}
    with pytest.raises(ValueError, match="option 'top_logprobs': must be <= 20"):
        HTTPOptions(top_logprobs=21)
    with pytest.raises(TypeError):
        HTTPBackend("http://127.0.0.1:9/v1", tiemout=3)  # a misspelt option is refused, not ignored
    assert "api_key" not in {f.name for f in fields(HTTPOptions)}  # a secret stays out of options and reprs


def test_unknown_options_name_the_known_ones():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class D(Options):
        k: int = option(4, "votes")

    with pytest.raises(TypeError, match=r"has no option\(s\) \['kk'\]; options: \['k'\]"):
        coerce_options(D, {"kk": "3"})
    assert D(**coerce_options(D, {"k": "3"})) == D(k=3)

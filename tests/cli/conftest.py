"""Fixtures shared by the CLI's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_default_judge(monkeypatch):
    """Fail a test that loads the default smollm2 judge (a command must use the judge it was given)."""
    import rewardkit.backends

    real_load = rewardkit.backends.load_backend

    def load(spec, **kw):
        if str(spec).startswith("smollm2"):
            raise AssertionError(f"the default judge was loaded: {spec}")
        return real_load(spec, **kw)

    monkeypatch.setattr(rewardkit.backends, "load_backend", load)

"""Where the suite finds the repository, whichever folder under tests/ a test file sits in:
``ROOT`` (the checkout's root) and ``FIXTURES`` (tests/fixtures/: the submission files the
grader's tests feed it). Test modules import these rather than counting ``parents[...]``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def ci_keeps(cases, keep: int = 1) -> list:
    """A parametrize list whose first ``keep`` cases CI's `make test` runs and whose others are
    marked extended (`make test-all` runs them all): for a test whose cases are each seconds
    of simulator, the first being the one that takes the most paths at the least cost."""
    import pytest

    out = []
    for i, c in enumerate(cases):
        if i < keep:
            out.append(c)
        else:
            out.append(pytest.param(*(c if isinstance(c, tuple) else (c,)),
                                    marks=pytest.mark.extended))
    return out

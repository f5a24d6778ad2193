"""Where the suite finds the repository, whichever folder under tests/ a test file sits in:
``ROOT`` (the checkout's root) and ``FIXTURES`` (tests/fixtures/: the submission files the
grader's tests feed it). Test modules import these rather than counting ``parents[...]``."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"

"""The submissions the labs derive from their masters, where the suite keeps them: a lab module
declares them (``LabSpec.derived``: autograder/labs/edits.py), ``python -m tools.lab_fixtures
--write`` writes them under tests/fixtures/, and tests/tooling/test_lab_fixtures.py fails while
a file differs. This module gives the grading tests that import it (test_bounds_grading.py,
test_guard_zones.py) the tool's list; new code imports ``tools.lab_fixtures`` itself."""

from __future__ import annotations

from tools.lab_fixtures import fixtures

__all__ = ["fixtures"]

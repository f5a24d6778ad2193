"""The child's entry point: the one file the grader's sandbox runs, in the child's copy of the
trusted code (``<trusted>/autograder/sandbox/inside/__main__.py``, beside
``<trusted>/autograder/inputs.py`` and ``<trusted>/book``)::

    python -I -B <trusted>/autograder/sandbox/inside/__main__.py launcher CONFIG
    python -I -B <trusted>/autograder/sandbox/inside/__main__.py driver CONFIG

The grader starts the launcher (launcher.py: limits, containment); the launcher starts the
driver (driver.py: isolation, then the session). Nothing runs on import: each role starts
here. ``-I`` keeps the script's folder, PYTHONPATH and the user's site off the path; the
trusted root is put first explicitly. The launcher takes it off again once its modules are
imported: the folder belongs to the child's uid (the submission may write there) while the
launcher stays alive as root, so a module planted there must never be found by an import the
launcher makes later.
"""

import os
import sys

ROLES = ("launcher", "driver")


def main(argv: list) -> None:
    if len(argv) != 3 or argv[1] not in ROLES:
        sys.exit(f"usage: {argv[0]} {{{'|'.join(ROLES)}}} CONFIG")
    role, cfg = argv[1], argv[2]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    sys.path.insert(0, root)
    if role == "launcher":
        from autograder.sandbox.inside.launcher import launch

        del sys.path[0]
        launch(cfg)
    else:
        from autograder.sandbox.inside.driver import drive

        drive(cfg)


if __name__ == "__main__":
    main(sys.argv)

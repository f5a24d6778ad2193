"""The course's autograder, split the way otter-grader is: assign (masters -> labs), check
(the student's self-test inside a lab), grade (a class, sandboxed, on GPU or simulator),
export (Gradescope results and bundles, merging shards). ``python -m autograder --help``."""

__all__ = ["check"]


def check(*args, **kwargs):
    """Run a lab's public tests on your function and say exactly what is wrong."""
    from .check import check as _check

    return _check(*args, **kwargs)

"""The four documents the course was written from, each named by what it is.

A reader never sees a file number: every page that uses a source names it by its title or
author (``short``) and links to its entry on the book's sources page
(``chapters/appendix_sources.md``, one MyST label per source: ``label``). Library code that
prints a source's name (``book.claims``) reads it from here, so the name is defined once.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    key: str  # the short key used in code (``claims.table()`` rows)
    short: str  # how the pages name it in tables, and in running text after "the"
    title: str
    author: str  # author or publisher, as the document gives it
    what: str  # what kind of document it is
    label: str  # its MyST label on the sources page
    address: str  # where it is published (the sources page links it)
    where: str = ""  # what to open there, when the address is a repository


SOURCES: dict[str, Source] = {s.key: s for s in (
    Source("vizuara", "Vizuara article", "The SwiGLU kernel",
           "Vizuara Kernel Engineering (series 04, Kernels for Inference)",
           "an article", "source-vizuara",
           "https://kernelengineering.vizuara.ai/a/swiglu-kernel.html"),
    Source("akunu", "akunu chapter", "Embedding and Activation Kernels",
           "a book on the akunu inference engine (Apple Metal)",
           "a book chapter", "source-akunu",
           "https://akunu.prabod.rathnayaka.me/part6/ch39-embedding-activation.html"),
    Source("orin", "Jetson Orin report", "SwiGLU CUDA Kernel 优化报告 "
           "(SwiGLU CUDA kernel optimisation report)", "an optimisation report for NVIDIA "
           "Jetson Orin (SM 8.7), in Chinese", "a report", "source-orin",
           "https://github.com/yhwang-hub/OrinMLLM",
           "cuda_kernel_optimized/swiglu_kernel/swiglu_kernel_optimization_report.md"),
    Source("ptx-dsl", "PTX-DSL page", "SwiGLU",
           "the documentation of a Python DSL for writing PTX (examples/hopper/swiglu.py)",
           "a documentation page", "source-ptx-dsl", "https://pyptx.dev/guides/swiglu/"),
)}


def name(key: str) -> str:
    """The name a page prints for source ``key`` (e.g. in a table's first column)."""
    return SOURCES[key].short

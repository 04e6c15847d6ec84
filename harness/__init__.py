"""vector-harness: evaluation and search with vector rewards and pluggable trainers.

``harness.train(...)`` and ``harness.evaluate(...)`` are the Python API (harness/api.py). Importing this package is
cheap on purpose: torch, transformers and datasets are imported only by the modules
that need them, so `harness --help` and `harness list` start in well under a second.
"""

__version__ = "0.1.0"

__all__ = ["RunResult", "evaluate", "train"]


def __getattr__(name: str):
    """``harness.train``, ``harness.evaluate`` and ``harness.RunResult`` (harness/api.py), imported when first used."""
    if name in __all__:
        from harness import api

        return getattr(api, name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")

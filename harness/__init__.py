"""vector-harness: evaluation and search with vector rewards and pluggable trainers.

Importing this package is cheap on purpose: torch, transformers and datasets are imported only by the modules
that need them, so `harness --help` and `harness list` start in well under a second.
"""

__version__ = "0.1.0"

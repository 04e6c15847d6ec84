"""Built-in searchers, registered through the same hook as third-party ones, with their presets (``quick``: a
2-core CPU in minutes; ``full``: a GPU). Only "module:attr" strings here: importing this package must not import
torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


@hookimpl
def harness_register_searchers(registry: Registry) -> None:
    registry.add(
        "best-of-k",
        "harness.searchers.best_of_k:BestOfK",
        description="Sample n answers per problem; report unbiased pass@k and best@k for each k <= n.",
        presets={
            "quick": {"n": 4, "k": "1,4", "max_new_tokens": 96, "temperature": 1.0},
            "full": {"n": 16, "k": "1,4,16", "max_new_tokens": 512},
        },
    )
    registry.add(
        "evolve",
        "harness.searchers.evolve:Evolve",
        description="Evolutionary search per problem: islands and a MAP-Elites grid over the reward vector; "
        "the policy rewrites parents shown with scores and feedback; solved@calls curves.",
        # quick: 16 model calls per problem: 4 seeds (best-of-k's own first 4 samples) + 3 generations of 4
        presets={
            "quick": {
                "seeds": 4,
                "children": 4,
                "calls": 16,
                "k": "1,4,8,16",
                "max_new_tokens": 96,
                "temperature": 1.0,
                "top": 1,
                "diverse": 1,
                "max_chars": 1200,
            },
            "full": {
                "seeds": 8,
                "children": 8,
                "calls": 64,
                "k": "1,4,16,64",
                "max_new_tokens": 512,
                "islands": 4,
                "top": 2,
                "diverse": 2,
                "max_chars": 3000,
            },
        },
    )

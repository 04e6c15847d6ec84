"""Built-in searchers, registered through the same hook as third-party ones. Only "module:attr" strings here:
importing this package must not import torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.hookspecs import hookimpl

if TYPE_CHECKING:
    from harness.plugins.registry import Registry


@hookimpl
def harness_register_searchers(registry: Registry) -> None:
    registry.add("best-of-k", "harness.searchers.best_of_k:BestOfK",
                 description="Sample n answers per problem; report unbiased pass@k and best@k for each k <= n.")
    registry.add("evolve", "harness.searchers.evolve:Evolve",
                 description="Evolutionary search per problem: islands and a MAP-Elites grid over the reward vector; "
                             "the policy rewrites parents shown with scores and feedback; solved@calls curves.")

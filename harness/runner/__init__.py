"""How a run happens, in the order it happens: ``config`` (what a run is), ``plan`` (every plugin built and checked,
no model), ``manifest`` (what ran, how far it got), ``phases`` (evaluate, train, evaluate; failures named), plus
``presets``, ``grid`` (many runs), ``distributed`` (one run over several processes). ``harness.run`` strings them
together."""

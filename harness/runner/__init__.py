"""How a run happens, in the order it happens (the steps of docs/architecture.md): ``config`` (what a run is),
``plan`` (step 2: every plugin built and checked, no model), ``load_model`` (step 3: the model and its engine),
``open_run_folder`` (step 4: the folder, locked, its manifest), ``phases`` (step 5: evaluate, train, evaluate;
failures named) and ``finish`` (its end: complete, indexed, summarised), ``manifest`` (what ran, how far it got),
plus ``presets``, ``run_settings`` (the flags and an experiment file as runs), ``grid`` (many runs;
``experiment_file`` reads a grid's file), ``distributed`` (one run over several processes), ``threads`` (torch's
threads per phase) and ``memory_plan`` (`harness memory`). ``harness.run`` strings them together."""

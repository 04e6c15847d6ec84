"""Steering vectors: ``vectors`` (the vector, its file, the per-row forward hook the engine samples under), ``build``
(stage 1: a vector from contrastive pairs, the layer chosen by intervention) and ``command`` (`harness steer`)."""

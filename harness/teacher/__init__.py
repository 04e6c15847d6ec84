"""A teacher model working for a trainer: ``rewrite`` (answers rewritten towards or away from a behaviour: contrastive
pairs for steering vectors, targets for SFT) and ``judge`` (a behaviour rated 1..5 from probabilities, for RLAIF)."""

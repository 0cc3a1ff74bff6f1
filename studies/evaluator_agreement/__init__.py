"""How far ACC-eq can be trusted: the evaluator's verdicts against a reader's."""

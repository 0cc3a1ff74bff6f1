"""Where the evaluator's oracle ACC-eq is lost."""

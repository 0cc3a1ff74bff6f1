"""A pipeline stage's fixed cost, and what was done about it."""

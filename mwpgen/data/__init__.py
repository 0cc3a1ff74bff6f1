"""Data: sources, fetching, raw readers, translation, equations, masking, preprocessing, splits, folds, keywords."""

"""Blind reading of two or more models' problems for the same test equations."""

"""Blind reading tools shared by the studies: reading sets and the judge's labels."""

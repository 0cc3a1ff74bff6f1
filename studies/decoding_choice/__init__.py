"""Greedy against beam decoding, chosen on the validation slice."""

"""The default profile and ours trained on a lent H200."""

"""Speed benchmarks: each measures arms side by side in one run and prints their ratios (README.md)."""

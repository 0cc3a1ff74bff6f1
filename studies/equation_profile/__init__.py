"""How the three datasets' equations differ."""

"""How many test problems a split that ignores duplicate texts would leak."""

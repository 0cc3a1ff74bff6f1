"""What verified generation has to choose from: every candidate, read blind."""

"""The context selector's settings, and the seed check that they hold."""

"""What several test modules build: tiny models, projects and readings, a scratch copy of the project, the
many-machines scenario. Imported as `tests.helpers.<module>` only."""

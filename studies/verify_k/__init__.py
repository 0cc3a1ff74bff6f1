"""Verified generation: K candidates ranked by the judge, against one."""

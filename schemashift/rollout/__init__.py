"""Rollout records: the versioned tables that runs and training write, and atomic file I/O."""

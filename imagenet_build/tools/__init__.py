"""Helpers around a build: the sample dataset, prepare-val."""

"""Renderers: each turns data read from the store into one output format."""

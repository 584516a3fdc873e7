"""Compile mode, for every suite and backend: how an item is compiled (`settings`), what the
compile did (`watch`: graph breaks, recompiles, time, graph ops), and what a failure was
(`failures`: the phase and the op the backend compiler refused)."""

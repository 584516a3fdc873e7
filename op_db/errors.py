"""Exceptions shared by every package.

`InputError` is anything the user can cause and fix (a bad option, a missing
file, a corrupt database); the CLI turns it into one sentence and exit 2.
"""


class NeuronCheckError(Exception):
    """Base class of the project's own errors."""


class InputError(NeuronCheckError):
    """Bad input from the user: one clear sentence, exit code 2."""

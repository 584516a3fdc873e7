"""The project's exception types, shared by every package.

`InputError` is anything the user can cause and fix (a bad option, a missing file, a
corrupt database, a bad sim profile); the CLI turns it into one sentence and exit 2.

They live here, in op_db, because op_db is the ground floor: DESIGN.md's one-way rule
(porting_cli -> reports -> op_db <- conformance) lets every package import op_db and no
other package is importable by all of them. The module holds nothing but these types,
so importing it costs nothing.
"""


class NeuronCheckError(Exception):
    """Base class of the project's own errors."""


class InputError(NeuronCheckError):
    """Bad input from the user: one clear sentence, exit code 2."""

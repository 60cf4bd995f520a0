"""The one exception type for bad input: files, shapes, values, names.

`InputError` subclasses `ValueError`, so library callers may catch either; the CLI turns it
into a one-line message and exit code 2.
"""


class InputError(ValueError):
    """Bad user input: the message names the file, row, layer or feature at fault."""

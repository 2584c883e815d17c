"""Errors meant for people: each carries one line naming the file and the fix.

The CLI prints `error: <message>` and exits non-zero; it never shows a traceback
for these.
"""


class BuildError(Exception):
    """A user mistake or a bad input; `str()` is the whole message."""

    exit_code = 1


class UsageError(BuildError):
    """Options that do not go together (found after parsing): exit 2, like click's own usage errors."""

    exit_code = 2


class InputError(BuildError):
    """One input file (an image, a list file) is unusable."""

    def __init__(self, path, problem):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):  # survive the trip back from a worker process
        return (type(self), (self.path, self.problem))

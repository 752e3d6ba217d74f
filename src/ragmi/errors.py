"""User-facing errors.

A :class:`RagmiError` carries one clear sentence that names the problem (a config key, a file, an
endpoint).  Workflow entry points catch it, print only that sentence, remove partial outputs and exit
non-zero, so the user never has to read a traceback for bad input.
"""


class RagmiError(Exception):
    """An error caused by the user's input or environment, with a message meant for the user."""


class ConfigError(RagmiError):
    """The configuration is invalid."""


class DataError(RagmiError):
    """A dataset is missing, unreadable or has the wrong columns."""


class EndpointError(RagmiError):
    """A generator endpoint (vLLM server, external API) is unreachable or misbehaves."""


class DiskFullError(RagmiError):
    """A write found no space left (``ENOSPC``) or the user's quota spent (``EDQUOT``): the message names
    the file system, the file being written and the space left; the job stops and a rerun, after space
    is freed, resumes from what was kept (:func:`ragmi.io.disk_full_error`)."""

    def __init__(self, message: str, path: str = "", free: int | None = None, total: int | None = None):
        super().__init__(message)
        self.path = path
        self.free = free
        self.total = total

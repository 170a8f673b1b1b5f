"""Statuses as exceptions: every failed call raises MetraleError carrying the
status code, its name and the library's message for the calling thread."""
from . import _lib

OK = 0
INVALID_ARGUMENT = 1
OUT_OF_MEMORY = 2
NOT_FOUND = 3
NO_DRIVER = 4
NO_DEVICE = 5
UNSUPPORTED = 6
CONTEXT_LOST = 7
REDZONE_CORRUPTED = 8
OUT_OF_BOUNDS = 9
CAPTURE = 10
BUFFER_TOO_SMALL = 11
DRIVER = 12
INTERNAL = 13


class MetraleError(Exception):
    """A call of libmetrale_gpu returned a status other than METRALE_OK."""

    def __init__(self, status, message, call=""):
        self.status = status
        self.name = _lib.lib().metrale_status_name(status).decode()
        self.message = message
        self.call = call
        where = f"{call}: " if call else ""
        super().__init__(f"{where}{self.name}: {message}")


def check(status, call=""):
    """Raises MetraleError for a non-OK status (message read at once, on this thread)."""
    if status != OK:
        msg = _lib.lib().metrale_last_error_message().decode("utf-8", "replace")
        raise MetraleError(status, msg, call)


def check_pluggable(status, call=""):
    if status != OK:
        msg = _lib.pluggable().metrale_pluggable_last_error_message().decode("utf-8", "replace")
        raise MetraleError(status, msg, call)

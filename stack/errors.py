"""Errors of the local stack launcher."""


class StackError(Exception):
    """A stack service could not be started, stopped or reached; the message says why."""

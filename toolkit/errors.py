"""Errors the user can fix. The CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """Bad input: the message names the problem and what to do about it."""


class ToolError(Exception):
    """An external tool (Vela, FVP, board, reference model) failed; the message says how."""

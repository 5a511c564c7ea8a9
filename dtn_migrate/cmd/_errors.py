"""The console entry points' own errors: one hierarchy for dtn_migrate.cmd.

Errors of the service itself are ``dtn_migrate.exception``'s; these are
what only a command meets (no bus, a demo step that failed).
"""


class CommandError(Exception):
    """A command cannot go on; the message says why."""

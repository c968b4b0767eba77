"""The one exception type users see for bad input."""


class ConfigError(ValueError):
    """A value outside what fastsim accepts: the message names the field, the value
    and what is allowed.  The CLI prints it without a traceback and exits with 2."""


class SimulationError(RuntimeError):
    """The engine could not finish a cluster (it reached its bound on scheduling points,
    e.g. on non-finite times); the CLI prints the message without a traceback, exit 1."""

"""The one exception type users see for bad input."""


class ConfigError(ValueError):
    """A value outside what fastsim accepts: the message names the field, the value
    and what is allowed.  The CLI prints it without a traceback and exits with 2."""

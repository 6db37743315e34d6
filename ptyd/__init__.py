"""ptyd: a per-user daemon that owns persistent PTY sessions for AI agents."""

__version__ = "0.1.0"

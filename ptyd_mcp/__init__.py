"""ptyd-mcp: ptyd's persistent terminals as MCP tools, on the official MCP Python SDK.

Only this package imports ``mcp``; the daemon (``ptyd``) never does. It talks to the daemon through
``ptyd_client`` like any other client, as one named agent whose token it keeps beside the daemon's state.
"""

__version__ = "0.1.0"

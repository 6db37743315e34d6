"""A session, orchestrated: its lifetime, its sends driven to their results, what it answers about itself."""

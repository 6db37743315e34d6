"""The hardening suite: hostile input, faults and load against a real daemon (see README.md)."""

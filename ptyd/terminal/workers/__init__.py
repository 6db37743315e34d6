"""Engine workers: terminal emulation in processes of its own, so that no output can take the daemon down.

A panic in the native engine (a Zig panic kills its process with SIGILL) costs a worker, which the daemon
replaces, replaying each of its sessions there; the session whose output does it twice moves to pyte. The
daemon keeps every PTY, the reading, the readiness decisions and each session's transcript; a worker holds only
engines (``host``), fed over a socketpair (``messages``) by each session's proxy (``proxy``), spread and
recovered by the pool (``pool``). See docs/engine-workers.md.
"""

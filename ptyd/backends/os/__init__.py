"""The operating system, asked and told: /proc, spawning, the PTY master, termios, containment, sandboxes."""

"""Is the program ready for more input? Evidence read from the kernel (/proc, the tty) and the decision."""

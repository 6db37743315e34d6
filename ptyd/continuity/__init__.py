"""Sessions that outlive their daemon: the state document, handover by exec, adoption after a crash, the fd keeper."""

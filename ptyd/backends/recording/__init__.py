"""Session recordings in asciicast v2: the loop-side recorder, the writer thread, and the directory they go to."""

"""ptyd's benchmark suite: ptyd side by side with a raw PTY, tmux and a fixed idle wait, as ratios (bench/run.py)."""

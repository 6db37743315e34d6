"""Run the daemon under cProfile timed by CPU time, not wall time (``--profile``).

A wall-clock profile of a daemon charges to whatever call was running when the scheduler switched to another
process (on 2 cores, the client woken by the daemon's own socket write), so ``transport.write`` looks like the
hot spot. CPU time shows what the daemon itself spends. ``python bench/profile_daemon.py OUT.pstats ARGS...``
runs ``ptyd ARGS...`` and writes the profile when the daemon exits (SIGINT or SIGTERM).
"""

from __future__ import annotations

import cProfile
import sys
import time


def main() -> None:
    out, args = sys.argv[1], sys.argv[2:]
    from ptyd.cli import main as ptyd_main

    profile = cProfile.Profile(time.process_time)
    profile.enable()
    try:
        ptyd_main(args)
    except (SystemExit, KeyboardInterrupt):
        pass
    finally:
        profile.disable()
        profile.dump_stats(out)


if __name__ == "__main__":
    main()

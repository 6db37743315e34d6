"""``ptyd web``: a read-only dashboard of the daemon's sessions in the browser, served by a client of the daemon
(the operator token), so the daemon itself stays lean: every session, its live screen (the daemon's own
rendering, pushed on its screen events), and the replay of recordings."""

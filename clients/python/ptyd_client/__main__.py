"""``python -m ptyd_client`` runs ``ptyctl``."""

from ptyd_client.ptyctl import main

main()

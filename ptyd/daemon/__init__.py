"""The daemon process: startup, the runtime directory and socket, signals, shutdown; systemd and dial-stdio."""

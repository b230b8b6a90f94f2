"""What the command line and the dashboard show of Flotilla's objects (pure functions, no I/O)."""

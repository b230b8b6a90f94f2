"""Controllers: thin loops that read from informers, call the pure decision modules and write results."""

"""What every generator of a committed file shares: one print / --write / --check command line."""

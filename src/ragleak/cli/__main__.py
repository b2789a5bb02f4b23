"""`python -m ragleak.cli`: the same entry point as the `ragleak` script."""

from ragleak.cli import main

main()

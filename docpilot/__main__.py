"""`python -m docpilot` runs the command line."""

from docpilot.cli import main

main()

"""The command line: argument parsing, output formatting, exit codes (0 ok, 2 bad input)."""

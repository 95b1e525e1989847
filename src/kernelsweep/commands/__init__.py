"""The command line: every subcommand in one table, the pre-flight check, the config docs."""

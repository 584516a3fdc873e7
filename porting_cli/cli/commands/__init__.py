"""One module per CLI command, each defining `command`; see porting_cli.cli.app.COMMANDS."""

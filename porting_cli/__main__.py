from porting_cli.cli import console_main

console_main()

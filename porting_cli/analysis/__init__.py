"""The static porting analysis of a user's script or project: the rules (`scan/`), the
device-agnostic patch (`fix`), the effort estimate (`effort`), project mode (`project`,
`batch_scan`, `gitignore`) and the porting report (`port_report`)."""

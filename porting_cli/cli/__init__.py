"""The command line: the click group (`app`), its commands (`commands/`), the options every
suite command shares (`options`, `suite_cli`), resuming runs (`resume`) and the reference pages
the docs generate from the code (`reference_pages`). Every command is thin: it parses, calls the
library and prints."""

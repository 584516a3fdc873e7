from porting_cli.cli import main

main(prog_name="neuron-check")

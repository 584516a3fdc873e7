"""The runtime half of the porting check: run the user's script (and its child processes) with
CUDA remapped to the target device and record the ops of each source line (trace*, remap*,
frames), locate where a run first leaves CPU's numbers (divergence), and say what a coverage
profile predicts for the ops it ran (prediction). The static half is porting_cli/analysis/scan/, with
fix, batch_scan, project and port_report beside it."""

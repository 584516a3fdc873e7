"""Rule 6's reference machinery: the second opinion for a device that runs an op differently.

`oprecord` records the aten calls that reach the device, `replay` runs that sequence again on
the CPU in the item's dtype, `primitives` judges each recorded primitive on its own, and
`accelerator_kernels` (with `fused_rnn_cells`) is the one table of kernels accelerators have and
the CPU lacks, which both sim and these CPU reruns use.
"""

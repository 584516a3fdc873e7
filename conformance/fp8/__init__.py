"""The FP8 suite: conversions, FP8 arithmetic and data movement, bit for bit."""

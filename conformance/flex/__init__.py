"""The flex attention suite: `neuron-check flex-attention` (suite `flex_attention`)."""

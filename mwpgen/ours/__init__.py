"""The paper's method: context selector (Eq. 5-6), equation consistency (Eq. 4), joint training, the saved bundle,
Table 4 variants."""

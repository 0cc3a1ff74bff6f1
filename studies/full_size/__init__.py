"""What the default profile would cost on a whole training fold."""

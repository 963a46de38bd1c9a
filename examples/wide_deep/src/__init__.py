"""The Wide&Deep example's model, data, options and callbacks (MindSpore's ``src/`` layout)."""

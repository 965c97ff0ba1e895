"""Stand-in of jax._src: holds xla_bridge only."""

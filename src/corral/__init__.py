"""corral: GPU cluster automation (spec -> rendered configs -> pyinfra deploys -> validated cluster)."""

__version__ = "0.1.0"

"""Day-2 workflows composed of engine runs and checks."""

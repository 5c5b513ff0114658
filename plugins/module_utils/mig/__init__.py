"""MIG (Multi-Instance GPU): what nvidia-smi shows, what the inventory asks for, whether it fits, and the steps to get
there (mig). Imports only the shared ground."""

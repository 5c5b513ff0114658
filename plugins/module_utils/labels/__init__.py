"""GPU node labels: what a node should carry and the patch that gets it there (labels), and what the labels step says
and records (labels_outcome). Imports the shared ground and the stacks' catalog (each stack's labels)."""

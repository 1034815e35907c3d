"""`tlint trace`: run a training script for a few optimizer steps and check what its training
step does (README "Tracing a training run"). The parent side (`command`) imports no torch;
the child (`child`, `hooks`) does."""

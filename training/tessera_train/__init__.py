"""Training recipe for Tessera's shipped nodule detector (see training/README.md)."""

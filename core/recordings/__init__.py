"""Recordings of real machines: captured with scripts.capture, stored bit-exactly, validated, compared.

schema (the declared JSON Schema, checked with jsonschema), fingerprint (machine facts and hashes of
single operations' result bits), store (what a recording holds: write, upgrade, load and validate
recordings), capture (run the fixed suite on a device of this machine; one live sum), fidelity (the
CUDA/CPU/WebGPU sum models against a recording, bit for bit), compare (what two machines' recordings
share and where they part), upload (a visitor's own capture file: bytes to a validated Recording marked
uploaded, within a size cap).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``). scripts.capture runs this package in a bare GPU image, so it stays clear of core.crowd.
"""

"""What lets many viewers share one server: costs, bounded caches, the gate, owned runs, links.

budget (what one request costs and may spend), bytecache (process-wide caches bounded in bytes),
gate (at most a few heavy computations at once, first come first served), runner (which training
pair a session owns, bounded memos), querystate (strict, bounded decoding of link parameters).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""

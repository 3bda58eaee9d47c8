"""What lets many viewers share one server: costs, bounded caches, the gate, owned runs, links.

budget (what one request costs and may spend), bytecache (the one kind of cache, ``ByteLRU``, and
every named cache of the process with its budget: bytes, and entries and age where asked), gate (at
most a few heavy computations at once, first come first served), arrivals (how many page runs are in
progress and what one costs: a crowd's wait, told to who arrives with it), runner (a session's own state: which
training pair it views, its last result of a kind), sharedrun (one paired run per preset for the whole room: its
steps computed once, each session's Play shown them as far as they go), querystate (strict, bounded decoding of link
parameters), room (the room's GPUs: one entry per session in a SQLite file every server process shares).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""

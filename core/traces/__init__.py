"""Op-by-op traces of a model run, and where two traces part.

record (the dispatch mode that keeps, for every op of every namespace, its module path, shapes, digests of
its input and output bits, an L1 norm, a sample of its output bits and its reduction length K), opfacts
(what the recorder knows of an op overload: its name, whether it is recorded, what it writes; and a call's
tensors read, returned and written), oprecord (what is kept of one op: its record and each output's fields),
modulepath (where in the model an op runs: its module path, or a scope's label outside every module), bits
(what is kept of one tensor's bits: its digest, sampled values and L1 norm, a complex value's parts, a
quantized tensor's levels and grid; which memory holds no data yet), arguments (an op's tensors, those it
writes, and the text of the rest: opaque objects such as packed weights by their content, never an address),
oprules (the name an op is known by, the namespaces not recorded, which ops
read across the batch's rows while one row is followed, which views move the batch, which outputs
are scratch, and the module tracker that names a backward op's module),
reductions (K and the terms of each sampled element for the ops that reduce: products, sums, norms, FFTs,
recurrent and quantized layers), sums (the terms themselves: a product's, a convolution's, a sum's), files (the trace
file: its declared schema, size cap, reading, writing and uploads), models (the bundled models
and a user's own ``make`` function), align (matching two op sequences that need not be equal),
judge (identical, born here or inherited; a born difference against the rounding envelope of its
op), opclass (how an op may round: a reduction, correctly rounded or an elementwise function; what its discrete
outputs are), compare (the per-op table and the one-line answer), run (one trace: the run recorded, with
its machine), pairs (the bundled pairs the page computes live).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``). ``python -m scripts.trace run`` runs it in a bare GPU image, as scripts.capture does.
"""

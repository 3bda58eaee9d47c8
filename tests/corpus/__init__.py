"""Real model families for the tracer's tests: Hugging Face ``transformers`` models built from small
configs with seeded random weights (nothing is downloaded), torch.nn's recurrent nets (rnn.py), a
chooser whose argmax a rounding-sized change flips (argmax.py), and kinds beyond transformers': a graph
network on a batch of graphs (gnn.py), dynamically quantized and quantization-aware models (quantized.py), a
spectral layer with complex FFTs (fft.py), a custom autograd.Function with float, integer and boolean outputs
(custom.py) and a diffusers UNet (unet.py). Each file has ``make(**args)`` returning ``(model, inputs)``, as
``python -m scripts.trace run --module FILE:make`` expects; ``batch`` and ``tokens`` (or ``size``, or the
graph network's ``graphs``) arrive as strings. Row 0 of every batch is the same example whatever the batch
size, so a batch of 4 can be compared with row 0 alone (``--follow-row 0``)."""

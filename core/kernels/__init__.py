"""How libraries and devices order reductions, modelled exactly, and sums that do not depend on order.

orders (the summation-order registry, its entries built from order_types, each running a function of
order_runs), sums (the textbook algorithms it names,
one vector or many rows at once), numpy_model (np.sum pairwise), torch_cpu_model (torch.sum on a CPU: cascade sums,
lanes, thread chunks), cuda_model and cuda_published (PyTorch's CUDA block reduction and the public GPU results it
reproduces) with cuda_launch (its kernel versions and launch rules), collectives (all-reduce algorithms), trees
(additions written out for small vectors), dot (dot products as CPUs and GPUs compute them: FMA, TF32, narrow
inputs, tiles, split-K, FP8 tensor cores) with dot_engine (their exact integer arithmetic), dot_fp8 (FP8 products'
limited accumulation and its promotion to float32) and dot_trace (every rounding of a model on a short vector),
reprosum (the order-independent sum), widesum (its one compiled pass on a CPU, numba, imported on first use), webgpu
(the orders of the WebGPU kernels a visitor's own GPU runs, and the model of the workgroup tree).

What it may import: its layer and the contracts in .importlinter (checked by
``lint-imports``).
"""

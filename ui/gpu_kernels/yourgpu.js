// The visitor's own GPU, through WebGPU: build the page's vector from the server's recipe, run the
// kernels of ui/gpu_kernels/*.wgsl on it, and hand the result bits back to the server, which judges them.
// Nothing is fetched: this module, its shaders and the recipe all come with the page.

/*__STREAM__*/

const SHADERS = /*__SHADERS__*/;
const started = new Map(); // job -> the running or finished promise, so a rerun never runs a job twice

function bitsOf(f32array) {
  return Array.from(new Uint32Array(f32array.buffer, f32array.byteOffset, f32array.length));
}

function browserName() {
  const m = navigator.userAgent.match(/(Edg|OPR|Firefox|Chrome|Version)\/(\d+)/);
  if (!m) return "unknown browser";
  const name = { Edg: "Edge", OPR: "Opera", Version: "Safari" }[m[1]] || m[1];
  return `${name} ${m[2]}`;
}

async function readBack(device, buffer, bytes) {
  const rb = device.createBuffer({ size: bytes, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buffer, 0, rb, 0, bytes);
  device.queue.submit([enc.finish()]);
  await rb.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(rb.getMappedRange().slice(0));
  rb.unmap();
  rb.destroy();
  return out;
}

function storage(device, bytes, extra = 0) {
  return device.createBuffer({ size: Math.max(16, bytes), usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST | extra });
}

function params(device, n, lanes) {
  const b = device.createBuffer({ size: 16, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(b, 0, new Uint32Array([n, lanes, 0, 0]));
  return b;
}

function dispatch(device, pipeline, buffers, groups) {
  const bind = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0),
    entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const enc = device.createCommandEncoder();
  const pass = enc.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, bind);
  pass.dispatchWorkgroups(groups);
  pass.end();
  device.queue.submit([enc.finish()]);
}

async function pipeline(device, name) {
  const module = device.createShaderModule({ code: SHADERS[name] });
  return device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" } });
}

// One GPU session: the device, the pipelines and the buffers that every kernel reads.
async function openGpu() {
  if (!("gpu" in navigator)) return { reason: "this browser has no WebGPU" };
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return { reason: "the browser gave no GPU adapter (WebGPU is off or blocked for this GPU)" };
  const hasSubgroups = adapter.features.has("subgroups");
  const device = await adapter.requestDevice({
    requiredFeatures: hasSubgroups ? ["subgroups"] : [],
    requiredLimits: { maxStorageBufferBindingSize: Math.min(adapter.limits.maxStorageBufferBindingSize, 1 << 30) },
  });
  const info = adapter.info || {};
  return { device, hasSubgroups, info };
}

// The vector on the GPU, and each kernel as a function of it: bits back, one float32 per sum.
async function onGpu(gpu, x, lanes, groups) {
  const device = gpu.device, n = x.length;
  const xb = storage(device, 4 * n);
  device.queue.writeBuffer(xb, 0, x);
  const p = params(device, n, lanes), pg = params(device, groups, 1);
  const partial = storage(device, 4 * (groups + 1)), one = storage(device, 4), acc = storage(device, 4);
  const pipes = {};
  const pipe = async (name) => (pipes[name] = pipes[name] || await pipeline(device, name));
  const k = {
    async sequential() {
      dispatch(device, await pipe("sequential"), [xb, one, p], 1);
      return bitsOf(await readBack(device, one, 4))[0];
    },
    async tree() {
      dispatch(device, await pipe("tree"), [xb, partial, p], groups);
      dispatch(device, await pipe("sequential"), [partial, one, pg], 1);
      return bitsOf(await readBack(device, one, 4))[0];
    },
    async subgroup() {
      dispatch(device, await pipe("subgroup"), [xb, partial, p], groups);
      const sizes = await readBack(device, partial, 4 * (groups + 1));
      dispatch(device, await pipe("sequential"), [partial, one, pg], 1);
      return { bits: bitsOf(await readBack(device, one, 4))[0], size: sizes[groups] };
    },
    async atomic(runs) {
      const out = [];
      for (let r = 0; r < runs; r++) {
        device.queue.writeBuffer(acc, 0, new Uint32Array([0]));
        dispatch(device, await pipe("atomic"), [xb, acc, p], groups);
        out.push(bitsOf(await readBack(device, acc, 4))[0]);
      }
      return out;
    },
    async elementwise(argBits) {
      const args = storage(device, 4 * 768), head = storage(device, 4 * 768), out = storage(device, 4 * 1536);
      device.queue.writeBuffer(args, 0, new Uint32Array(argBits));
      device.queue.writeBuffer(head, 0, x.subarray(0, 768));
      dispatch(device, await pipe("elementwise"), [args, head, out], 4);
      const bits = bitsOf(await readBack(device, out, 4 * 1536));
      for (const b of [args, head, out]) b.destroy();
      return bits;
    },
    release() { for (const b of [xb, p, pg, partial, one, acc]) b.destroy(); },
  };
  return k;
}

// Non-associativity's three numbers: both groupings on the GPU, bits back.
async function runTriple(gpu, data) {
  const device = gpu.device;
  const xb = storage(device, 16), out = storage(device, 8);
  device.queue.writeBuffer(xb, 0, new Uint32Array([...data.values, 0]));
  dispatch(device, await pipeline(device, "triple"), [xb, out], 1);
  const bits = bitsOf(await readBack(device, out, 8));
  for (const b of [xb, out]) b.destroy();
  return bits;
}

async function run(data, say) {
  const t0 = performance.now();
  const gpu = await openGpu();
  if (!gpu.device) return { status: "unavailable", reason: gpu.reason };
  if (data.kind === "triple") {
    const groupings = await runTriple(gpu, data);
    gpu.device.destroy();
    return { status: "ok", job: data.job, groupings, browser: browserName(),
             adapter: { vendor: gpu.info.vendor || "", architecture: gpu.info.architecture || "" } };
  }
  const report = {
    status: "ok", job: data.job, n: data.recipe.n, browser: browserName(),
    adapter: { vendor: gpu.info.vendor || "", architecture: gpu.info.architecture || "", description: gpu.info.description || "" },
  };
  say("Building the page's vector on your device…");
  const x = await buildVector(data.recipe, (f) => { say(`Building the page's vector on your device: ${Math.round(100 * f)}%`); return new Promise((r) => setTimeout(r, 0)); });
  report.digest = digest(x);
  report.build_ms = Math.round(performance.now() - t0);
  const k = await onGpu(gpu, x, data.lanes, data.groups);
  say("Your GPU: left to right in one invocation…");
  report.sequential = await k.sequential();
  report.first_ms = Math.round(performance.now() - t0);
  say(`Your GPU, left to right: ${new Float32Array(new Uint32Array([report.sequential]).buffer)[0]}. Next: the workgroup tree…`);
  report.tree = await k.tree();
  if (gpu.hasSubgroups) {
    say("Your GPU: subgroupAdd, the hardware's own order…");
    try { report.subgroup = await k.subgroup(); } catch (e) { report.subgroup_error = String(e).slice(0, 200); }
  }
  say(`Your GPU: atomic adds, run ${data.atomic_runs} times…`);
  report.atomic = await k.atomic(data.atomic_runs);
  say("Your GPU: exp, tanh, log, additions and multiply-adds…");
  const ew = await k.elementwise(data.args);
  for (const [i, name] of ["exp", "tanh", "log", "add", "mul_add", "fma"].entries()) report[name] = ew.slice(256 * i, 256 * (i + 1));
  k.release();
  gpu.device.destroy();
  report.total_ms = Math.round(performance.now() - t0);
  return report;
}

export default function (component) {
  const { data, parentElement, setStateValue } = component;
  let box = parentElement.querySelector(".yourgpu");
  if (!box) {
    box = document.createElement("div");
    box.className = "yourgpu";
    box.setAttribute("data-testid", "yourgpu-progress");
    parentElement.appendChild(box);
  }
  const say = (text) => { if (box.dataset.job === data.job) box.textContent = text; };
  box.dataset.job = data.job;
  if (data.done) { box.textContent = ""; return; }
  if (!started.has(data.job)) {
    started.set(data.job, run(data, say).catch((e) => ({ status: "error", reason: String(e).slice(0, 300) })));
  }
  started.get(data.job).then((report) => {
    report.job = data.job;
    say("");
    setStateValue("report", report);
  });
}

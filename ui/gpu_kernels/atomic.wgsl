// The tree's workgroup sums added to one float32 by a compare-exchange loop on its bits (WGSL has no
// atomic float add): each workgroup adds when it gets there, so the order is whatever order they finish in.
struct Params { n: u32, lanes: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> total: array<atomic<u32>, 1>;
@group(0) @binding(2) var<uniform> p: Params;
var<workgroup> sh: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>) {
  let acc = lane_sum(wid.x * 256u + t, p.n, p.lanes);  // lanes.wgsl
  sh[t] = acc;
  workgroupBarrier();
  for (var s: u32 = 128u; s > 0u; s = s >> 1u) {
    if (t < s) {
      sh[t] = sh[t] + sh[t + s];
    }
    workgroupBarrier();
  }
  if (t == 0u) {
    let v = sh[0];
    var old = atomicLoad(&total[0]);
    loop {
      let r = atomicCompareExchangeWeak(&total[0], old, bitcast<u32>(bitcast<f32>(old) + v));
      if (r.exchanged) {
        break;
      }
      old = r.old_value;
    }
  }
}

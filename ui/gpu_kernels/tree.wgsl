// The modelled workgroup tree (core/kernels/webgpu.py): invocation t of workgroup g adds every
// (256 * groups)-th value from g * 256 + t left to right, then the workgroup halves its 256 sums in
// shared memory. One float32 per workgroup; sequential.wgsl adds them left to right.
struct Params { n: u32, lanes: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
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
    partial[wid.x] = sh[0];
  }
}

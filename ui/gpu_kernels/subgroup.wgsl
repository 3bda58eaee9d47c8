// The same lanes as tree.wgsl, combined by the hardware's subgroupAdd: its order is the GPU's own.
// Each subgroup's total lands in its first invocation's slot (the others hold +0, exact to add), and one
// invocation adds the 256 slots left to right. out[groups] reports the subgroup size.
enable subgroups;
struct Params { n: u32, lanes: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> partial: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
var<workgroup> sh: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) t: u32, @builtin(workgroup_id) wid: vec3<u32>,
        @builtin(subgroup_invocation_id) lane: u32, @builtin(subgroup_size) size: u32) {
  let acc = lane_sum(wid.x * 256u + t, p.n, p.lanes);  // lanes.wgsl
  let total = subgroupAdd(acc);
  sh[t] = select(0.0, total, lane == 0u);
  workgroupBarrier();
  if (t == 0u) {
    var s: f32 = sh[0];
    for (var k: u32 = 1u; k < 256u; k = k + 1u) {
      s = s + sh[k];
    }
    partial[wid.x] = s;
    if (wid.x == 0u) {
      partial[p.lanes / 256u] = f32(size);
    }
  }
}

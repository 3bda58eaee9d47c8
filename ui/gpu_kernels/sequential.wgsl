// One invocation adds x[0], x[1], ..., x[n-1] left to right, each addition rounded to float32:
// the CPU's left-to-right order. Also the second pass of the tree, subgroup kernels over their partials.
struct Params { n: u32, lanes: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(1)
fn main() {
  var s: f32 = x[0];
  for (var i: u32 = 1u; i < p.n; i = i + 1u) {
    s = s + x[i];
  }
  out[0] = s;
}

// Three stored float32 values added in both groupings, each addition rounded to float32: (a + b) + c and
// a + (b + c). The values come from a buffer, so no compiler can fold them (WGSL would let one regroup them:
// a GPU that did would show other bits, which the page says).
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let ab = x[0] + x[1];
  let bc = x[1] + x[2];
  out[0] = ab + x[2];
  out[1] = x[0] + bc;
}

// One invocation's lane of the tree, subgroup and atomic kernels: x[first], x[first + lanes], ... left to right
// (the first value as it is, so a lone -0 stays -0; +0 for a lane with no value). Appended to each of them.
fn lane_sum(first: u32, n: u32, lanes: u32) -> f32 {
  var i: u32 = first;
  var acc: f32 = 0.0;
  if (i < n) {
    acc = x[i];
    i = i + lanes;
    while (i < n) {
      acc = acc + x[i];
      i = i + lanes;
    }
  }
  return acc;
}
